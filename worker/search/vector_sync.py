"""Vector sync: drain the vector queue into Chroma, in batches, with capped jittered backoff."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Callable

import msgspec

from worker.backoff import Backoff
from worker.search.sync_lock import SyncLock, sync_lock
from worker.search.vector_index import (
    ChromaTarget,
    VectorDocument,
    VectorIndex,
    chroma_target,
    documents_for,
)
from worker.settings import Settings
from worker.storage.index_records import RowKind, VectorRetry
from worker.storage.protocol import IndexStore, StoreError, StoreUnavailableError

logger = logging.getLogger(__name__)

IndexOpener = Callable[[], VectorIndex]


class SyncPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How the drain paces itself."""

    batch_rows: int = 64
    poll_s: float = 1.0
    """Sleep when nothing is due."""
    backoff: Backoff = Backoff(base_s=1.0, max_s=300.0)
    """Capped so that an outage costs one attempt per row per five minutes at most."""
    lease_s: float = 60.0
    """A claimed row whose worker died is claimed again after this: its vectors wait that long.
    Longer than a batch may take (`call_timeout_s`); a batch that outlives it anyway is only
    indexed twice (an upsert by id)."""
    call_timeout_s: float = 45.0
    """Embedding and upserting one batch: 64 rows take about a second on a CPU, and the HTTP
    client has its own, shorter timeouts (5 s to connect, 30 s to read)."""
    probe: Backoff = Backoff(base_s=1.0, max_s=30.0)
    """While the index fails, a heartbeat is sent this often before any row is claimed again:
    rows are not charged an attempt per probe, and indexing resumes within 30 s of its return."""


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
        self._storage_failing = False
        self._unfinished: list[tuple[RowKind, int]] = []

    async def drain_once(self) -> DrainResult:
        """Index one batch of due vector-queue rows (or retry them later on any failure)."""
        if self._unfinished:  # indexed before the store went away: marked once it is back
            await self._store.finish_vector_jobs(self._unfinished)
            self._unfinished = []
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
            error = _one_line(e)
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
        keys = [(j.kind, j.id) for j in jobs]
        try:
            await self._store.finish_vector_jobs(keys)
        except StoreError:
            # Claimed under a lease of minutes: left alone, an outage of seconds would hold
            # these rows (already in the index) as pending for the lease's length.
            self._unfinished = keys
            raise
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
        """Drain forever (until cancelled): poll when idle; while the index fails, probe it
        with backoff and claim no row until it answers."""
        failures = 0
        while True:
            if self._failing:
                await asyncio.sleep(self._policy.probe.delay_s(failures, rand=self._rng))
                if not await self._probe():
                    failures += 1
                    continue
            try:
                result = await self.drain_once()
            except StoreUnavailableError as e:  # the store warned once for its outage
                logger.debug("vector sync waits for the store: %s", e)
                await asyncio.sleep(sync_backoff_s(0, self._policy, self._rng))
                continue
            except StoreError as e:  # storage answering with errors: not the index's fault
                level = logging.DEBUG if self._storage_failing else logging.WARNING
                logger.log(level, "vector sync: storage failed, retried with backoff: %s", e)
                self._storage_failing = True
                await asyncio.sleep(sync_backoff_s(failures, self._policy, self._rng))
                failures += 1
                continue
            self._storage_failing = False
            if result.failed:
                failures += 1
                await self._note_failure(result.error or "unknown error")
                continue
            if self._failing:
                self._failing, failures = False, 0
                logger.info("vector index reachable again; %s rows wait", await self._lag())
            failures = 0
            if result.idle:
                await asyncio.sleep(self._policy.poll_s)

    async def _probe(self) -> bool:
        """True when the index answers a heartbeat (opening it first when needed)."""
        try:
            await asyncio.wait_for(asyncio.to_thread(self._heartbeat), self._policy.call_timeout_s)
        except Exception as e:
            self._index = None
            logger.debug("vector index still failing: %s", _one_line(e))
            return False
        return True

    def _heartbeat(self) -> None:
        if self._index is None:
            self._index = self._open_index()
        self._index.heartbeat()

    async def _lag(self) -> str:
        try:
            return str(await self._store.vector_lag())
        except StoreError:
            return "some"

    async def _note_failure(self, error: str) -> None:
        # One warning per outage, not one per attempt (the original logged 8.9 M lines).
        if self._failing:
            logger.debug("vector index still failing: %s", error)
            return
        self._failing = True
        logger.warning(
            "vector index unavailable (%s); %s rows wait, probed with backoff until it answers",
            error,
            await self._lag(),
        )

    def _upsert(self, docs: list[VectorDocument]) -> None:
        if self._index is None:
            self._index = self._open_index()
        self._index.upsert(docs)


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]


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
