"""memq's files hold prompts, tool output and observations: only their owner may read them."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the hook's relay path imports this module and nothing else of memq's
    from pathlib import Path

PRIVATE_UMASK = 0o077
"""Every file and directory a memq process creates: 0600 and 0700 (SQLite, Chroma, spool, AOF)."""

_DATABASE_FILES = ("memq.db", "memq.db-wal", "memq.db-shm")


def restrict_new_files() -> None:
    """Make what this process (and its children, e.g. redis-server) creates private."""
    os.umask(PRIVATE_UMASK)


def tighten_data_dir(data_dir: Path) -> None:
    """Close an existing data dir made readable by an older memq (0755 dir, 0644 database)."""
    for path, mode in [(data_dir, 0o700), *((data_dir / n, 0o600) for n in _DATABASE_FILES)]:
        try:
            info = path.stat()
            if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & ~mode:
                path.chmod(mode)
        except OSError:
            continue  # missing, or not ours to change: nothing to tighten
