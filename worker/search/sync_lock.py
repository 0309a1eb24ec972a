"""The lock that keeps the embedded Chroma index to one writing process per machine."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from worker.search.vector_index import ChromaTarget


class SyncLock:
    """An exclusive lock on a file next to the embedded index: one indexing process per machine.

    Chroma's embedded store is not safe to write from two processes at once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = self.path.open("ab")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return False
        self._file = f
        return True

    def release(self) -> None:
        """Let another process index."""
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def sync_lock(target: ChromaTarget) -> SyncLock | None:
    """The lock the embedded index needs; None for a Chroma server (it serialises writes)."""
    if target.kind != "embedded" or target.path is None:
        return None
    return SyncLock(Path(target.path).with_name("chroma.lock"))
