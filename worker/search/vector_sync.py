"""Vector sync: drain the vector queue into Chroma, in batches, with capped jittered backoff."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import msgspec

from worker.backoff import Backoff
from worker.search.vector_index import (
    ChromaTarget,
    VectorDocument,
    VectorIndex,
    chroma_target,
    documents_for,
)
from worker.settings import Settings
from worker.storage.index_records import VectorRetry
from worker.storage.protocol import IndexStore

logger = logging.getLogger(__name__)

IndexOpener = Callable[[], VectorIndex]


class SyncPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How the drain paces itself."""

    batch_rows: int = 64
    poll_s: float = 1.0
    """Sleep when nothing is due."""
    backoff: Backoff = Backoff(base_s=1.0, max_s=300.0)
    """Capped so that an outage costs one attempt per row per five minutes at most."""
    lease_s: float = 300.0
    """A claimed row whose worker died is claimed again after this."""
    call_timeout_s: float = 120.0
    """Chroma's HTTP client never times out on its own."""


class DrainResult(msgspec.Struct, frozen=True, kw_only=True):
    """One batch: rows indexed, rows failed (retried later), nothing due (idle)."""

    indexed: int = 0
    failed: int = 0
    error: str | None = None

    @property
    def idle(self) -> bool:
        """Nothing was due."""
        return self.indexed == 0 and self.failed == 0


def sync_backoff_s(
    attempts: int, policy: SyncPolicy, rng: Callable[[], float] = random.random
) -> float:
    """Delay before attempt `attempts + 1`, by the sync's backoff."""
    return policy.backoff.delay_s(attempts + 1, rand=rng)


class VectorSync:
    """Feeds Chroma from the vector queue; never raises into storage's path, only lags."""

    def __init__(
        self,
        store: IndexStore,
        open_index: IndexOpener,
        *,
        policy: SyncPolicy | None = None,
        clock: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self._open_index = open_index
        self._policy = policy or SyncPolicy()
        self._clock = clock
        self._rng = rng
        self._index: VectorIndex | None = None
        self._failing = False

    async def drain_once(self) -> DrainResult:
        """Index one batch of due vector-queue rows (or retry them later on any failure)."""
        now_ms = int(self._clock() * 1000)
        lease_ms = int(self._policy.lease_s * 1000)
        jobs = await self._store.claim_vector_jobs(
            limit=self._policy.batch_rows, now_ms=now_ms, lease_until_ms=now_ms + lease_ms
        )
        if not jobs:
            return DrainResult()
        # A row deleted since it was queued has nothing left to index.
        docs = [doc for job in jobs if job.row is not None for doc in documents_for(job.row)]
        try:
            if docs:
                await asyncio.wait_for(
                    asyncio.to_thread(self._upsert, docs), self._policy.call_timeout_s
                )
        except Exception as e:
            self._index = None  # reconnect next time: the client may be broken
            error = f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]
            await self._store.retry_vector_jobs(
                [
                    VectorRetry(
                        kind=j.kind,
                        id=j.id,
                        next_attempt_at_ms=now_ms
                        + int(sync_backoff_s(j.attempts, self._policy, self._rng) * 1000),
                    )
                    for j in jobs
                ],
                error,
            )
            return DrainResult(failed=len(jobs), error=error)
        await self._store.finish_vector_jobs([(j.kind, j.id) for j in jobs])
        return DrainResult(indexed=len(jobs))

    async def drain(self) -> int:
        """Index everything due now; stops at the first failed batch. Returns rows indexed."""
        indexed = 0
        while True:
            result = await self.drain_once()
            indexed += result.indexed
            if result.idle or result.failed:
                return indexed

    async def run(self) -> None:
        """Drain forever (until cancelled): poll when idle, back off while Chroma fails."""
        failures = 0
        while True:
            try:
                result = await self.drain_once()
            except Exception as e:  # storage itself failing: the same backoff applies
                result = DrainResult(failed=1, error=f"{type(e).__name__}: {e}")
            if result.failed:
                failures += 1
                await self._note_failure(result.error or "unknown error")
                await asyncio.sleep(sync_backoff_s(failures - 1, self._policy, self._rng))
                continue
            if result.indexed and failures:
                logger.info("vector index reachable again")
                failures, self._failing = 0, False
            if result.idle:
                await asyncio.sleep(self._policy.poll_s)

    async def _note_failure(self, error: str) -> None:
        # One warning per outage, not one per attempt (the original logged 8.9 M lines).
        if self._failing:
            logger.debug("vector index still failing: %s", error)
            return
        self._failing = True
        try:
            waiting = f"{await self._store.vector_lag()} rows wait"
        except Exception:  # storage may be what is failing
            waiting = "rows wait"
        logger.warning("vector index unavailable (%s); %s, retried with backoff", error, waiting)

    def _upsert(self, docs: list[VectorDocument]) -> None:
        if self._index is None:
            self._index = self._open_index()
        self._index.upsert(docs)


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


def index_opener(settings: Settings, target: ChromaTarget) -> IndexOpener:
    """Open the tenant's collection with the configured embedding function (slow: in a thread)."""

    def open_index() -> VectorIndex:
        from worker.search.embeddings import load_embedding_function

        return VectorIndex.open(
            target, settings.prefix, load_embedding_function(settings.embedding)
        )

    return open_index


class BackgroundSync:
    """The worker's drain task and the lock it holds; stop() ends both."""

    def __init__(self, task: asyncio.Task[None], lock: SyncLock | None) -> None:
        self.task = task
        self.lock = lock

    async def stop(self) -> None:
        """Cancel the task, wait for it, release the lock."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if self.lock is not None:
            self.lock.release()


def start_vector_sync(settings: Settings, store: IndexStore) -> BackgroundSync | None:
    """Start draining the vector queue in the background (call from a running event loop).

    None when MEMQ_CHROMA=off, or when another process here drains into the embedded index.
    """
    target = chroma_target(settings)
    if target is None:
        return None
    lock = sync_lock(target)
    try:
        if lock is not None and not lock.acquire():
            logger.info("another memq process holds %s and indexes vectors here", lock.path)
            return None
    except OSError as e:  # storage must run even where the index cannot
        logger.warning("vector sync off: cannot lock %s (%s)", lock.path if lock else "", e)
        return None
    sync = VectorSync(store, index_opener(settings, target))
    task = asyncio.create_task(sync.run(), name=f"memq-vector-sync-{os.getpid()}")
    return BackgroundSync(task, lock)
