"""Fingerprints of the files a tool call touched, taken on the agent host right after the call."""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path
from typing import NamedTuple

from msgspec.structs import replace

from pipeline.events import Event, ToolCall
from pipeline.turns.evidence import file_evidence
from worker.file_digest import file_sha256, relative_key
from worker.project import checkout_root

MAX_HASHED_FILES = 64  # a call naming more files (a huge patch) records the first ones only
# The hook's whole budget is 1 s: files still unhashed after this are recorded as unknown.
HASH_BUDGET_S = 0.1
# Hashing threads in this process, started as needed and kept; a hung network mount can
# leave some stuck for good: with all of them busy, events are recorded without hashes.
_MAX_THREADS = 16


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


class _Job(NamedTuple):
    where: dict[str, Path]
    deadline: float
    found: dict[str, str | None]
    done: threading.Event


class _HashingThreads:
    """Daemon threads that hash files: a read stuck in the kernel (a hung mount) holds neither
    the caller past its deadline nor the process's exit. Kept running: starting a thread per
    event costs more than hashing a small file."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        self._idle = 0

    def submit(self, job: _Job) -> bool:
        """Queue the job for an idle thread (or a new one); False when all are busy."""
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._started < self._most:
                self._started += 1
                threading.Thread(target=self._work, name="memq-file-hashes", daemon=True).start()
            else:
                return False
        self._jobs.put(job)
        return True

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                for key, path in job.where.items():
                    if time.monotonic() > job.deadline:
                        break
                    try:
                        job.found[key] = file_sha256(path, deadline=job.deadline)
                    except OSError:  # gone right after the call (a deleting patch)
                        job.found[key] = None
            finally:
                job.done.set()
                with self._lock:
                    self._idle += 1


_THREADS = _HashingThreads(_MAX_THREADS)


def _hash_all(where: dict[str, Path], deadline: float) -> dict[str, str | None]:
    """The hashes taken by `deadline` (on a hashing thread); the others are left out."""
    job = _Job(where, deadline, {}, threading.Event())
    if not _THREADS.submit(job):
        return {}  # every hashing thread is stuck: do not wait for them
    job.done.wait(max(0.0, deadline - time.monotonic()))
    return dict(job.found)  # a copy: a late thread may still add to it
