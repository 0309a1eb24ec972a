"""Fingerprints of the files a tool call touched, taken on the agent host right after the call."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from msgspec.structs import replace

from pipeline.events import Event, ToolCall
from pipeline.turns.evidence import file_evidence
from worker.file_digest import file_sha256, relative_key
from worker.project import checkout_root

MAX_HASHED_FILES = 64  # a call naming more files (a huge patch) records the first ones only
# The hook's whole budget is 1 s: files still unhashed after this are recorded as unknown.
HASH_BUDGET_S = 0.1
# Hashing threads at once, in this process; a hung network mount can leave some stuck for
# good: past this many, events are recorded without hashes rather than starting more.
_MAX_THREADS = 16
_threads = threading.BoundedSemaphore(_MAX_THREADS)


def with_file_hashes(event: Event, *, budget_s: float = HASH_BUDGET_S) -> Event:
    """The event with `file_hashes` for its evidence paths (a tool call that names files).

    A file not hashed within `budget_s` (or not a regular file) is recorded as unknown
    (None): the event itself is never held up or lost for a hash.
    """
    if not isinstance(event, ToolCall) or event.file_hashes is not None:
        return event
    evidence = file_evidence([event])
    paths = list(dict.fromkeys(evidence.read + evidence.modified))[:MAX_HASHED_FILES]
    if not paths:
        return event
    cwd = os.path.abspath(event.cwd) if event.cwd else os.getcwd()
    root = checkout_root(Path(cwd))
    where = dict(relative_key(path, cwd, root) for path in paths)
    found = _hash_all(where, time.monotonic() + budget_s)
    return replace(event, file_hashes={key: found.get(key) for key in where})


def _hash_all(where: dict[str, Path], deadline: float) -> dict[str, str | None]:
    """The hashes taken by `deadline`, on a daemon thread: a read stuck in the kernel (a hung
    mount) holds neither the caller nor the process's exit."""
    found: dict[str, str | None] = {}
    if not _threads.acquire(blocking=False):
        return found  # earlier hashing threads are all stuck: do not pile up more

    def run() -> None:
        try:
            for key, path in where.items():
                if time.monotonic() > deadline:
                    return
                try:
                    found[key] = file_sha256(path, deadline=deadline)
                except OSError:  # gone right after the call (a deleting patch)
                    found[key] = None
        finally:
            _threads.release()

    thread = threading.Thread(target=run, name="memq-file-hashes", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    return dict(found)  # a copy: a late thread may still add to `found`
