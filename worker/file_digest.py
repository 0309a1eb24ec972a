"""SHA-256 of a file's content, the fingerprint memories keep of the files they are about."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

MAX_HASHED_BYTES = 2 * 1024 * 1024  # larger files are recorded as unknown
_BLOCK_BYTES = 256 * 1024
# Never wait on the other end of a FIFO, never become a terminal's controlling process.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def file_sha256(path: str | os.PathLike[str], *, deadline: float | None = None) -> str | None:
    """The content's SHA-256 hex; None when not a regular file, unreadable, over
    MAX_HASHED_BYTES, or still being read at `deadline` (a `time.monotonic()` value).

    Raises FileNotFoundError (or NotADirectoryError) when nothing is at `path`: a file that
    is gone is a change, not an unknown.
    """
    try:
        # A FIFO blocks open() until a writer comes, /dev/zero never ends: only regular
        # files are opened, and what was opened is checked again (it may have been swapped).
        if not _is_small_regular_file(os.stat(path)):
            return None
        fd = os.open(path, _OPEN_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError:  # no permission, a name too long, a loop of links
        return None
    try:
        if not _is_small_regular_file(os.fstat(fd)):
            return None
        digest = hashlib.sha256()
        left = MAX_HASHED_BYTES + 1  # a file still growing is cut off here, as unknown
        while left > 0 and (block := os.read(fd, min(_BLOCK_BYTES, left))):
            left -= len(block)
            digest.update(block)
            if deadline is not None and time.monotonic() > deadline:
                return None
        return digest.hexdigest() if left > 0 else None
    except OSError:  # a read that fails (an I/O error, a file truncated under us)
        return None
    finally:
        os.close(fd)


def _is_small_regular_file(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_HASHED_BYTES


def relative_key(path: str, cwd: str, root: Path | None) -> tuple[str, Path]:
    """The key a path is stored under (relative to `root` when inside it) and its location.

    A relative path is taken from `cwd`; keys use `/`, so another checkout matches.
    """
    where = Path(os.path.normpath(os.path.join(cwd, path)))  # an absolute `path` wins
    if root is not None:
        try:
            return where.relative_to(root).as_posix(), where
        except ValueError:
            pass
    return where.as_posix(), where
