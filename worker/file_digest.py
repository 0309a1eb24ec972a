"""SHA-256 of a file's content, the fingerprint memories keep of the files they are about."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

MAX_HASHED_BYTES = 2 * 1024 * 1024  # larger files are recorded as unknown
_BLOCK_BYTES = 256 * 1024


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """The content's SHA-256 hex; None when unreadable or over MAX_HASHED_BYTES.

    Raises FileNotFoundError (or NotADirectoryError) when nothing is at `path`: a file that
    is gone is a change, not an unknown.
    """
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > MAX_HASHED_BYTES:
                return None
            digest = hashlib.sha256()
            while block := f.read(_BLOCK_BYTES):
                digest.update(block)
            return digest.hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError:  # a directory, no permission, a device that fails to read
        return None


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
