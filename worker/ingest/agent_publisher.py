"""The HTTP hook's publishing side: a bounded queue a background task empties into Redis.

A hook request only queues its prepared events (or, while Redis is away or the queue is
full, appends them to the spool), so its answer never waits for Redis. The task publishes
over one persistent redis-py client; a failed publish spools the batch and everything
queued behind it, and from then on requests spool directly until a flush of the spool
(the same spool and flush as the command hook's) empties it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from worker.errors import ConfigError, RedisUnavailableError
from worker.ingest.agent_metrics import AgentMetrics
from worker.ingest.prepare import PreparedEvent
from worker.ingest.producer import (
    Producer,
    PublishNotReplicatedError,
    PublishRefusedError,
    SyncProducer,
)
from worker.ingest.spool import Spool
from worker.settings import Settings

if TYPE_CHECKING:
    from worker.ingest.producer import PublishResult
    from worker.ingest.spool import FlushResult

logger = logging.getLogger(__name__)

# Hook requests waiting to be published (each ≤ MEMQ_MAX_EVENT_BYTES, mostly a few KB);
# past it they are spooled. At 200 requests/s, over 2 s of a slow Redis.
QUEUE_BATCHES = 500
RETRY_S = 0.5  # while events wait in the spool, how often a flush is tried
_BATCH_EVENTS = 200  # events one pipelined publish carries at most
DRAIN_S = 2.0  # on shutdown, how long queued events may still go to Redis
_BEHIND_SPOOL = "older events wait in the spool"


class AgentPublisher:
    """Queues hook events for a background publisher; spools what Redis cannot take now."""

    def __init__(
        self,
        settings: Settings,
        *,
        queue_batches: int = QUEUE_BATCHES,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.spool = Spool.from_settings(settings)
        self.metrics = metrics or AgentMetrics()
        self.metrics.watch(self.spool.status, lambda: self.stall() is not None)
        self._queue: asyncio.Queue[Sequence[PreparedEvent]] = asyncio.Queue(queue_batches)
        self._producer: Producer | None = None
        self._spooling = self.spool.pending()  # older events first: they are flushed before
        self._flush_failing = False  # the last flush could not reach Redis (said once)
        self._tasks: list[asyncio.Task[None]] = []
        self._appending = 0  # spool appends under way (in threads)
        self._append_order = asyncio.Lock()  # FIFO: appends land in the order they were asked
        self._busy = 0  # batches being published or spooled
        self._progress_at = time.monotonic()  # when a batch was last taken, sent or spooled
        self._late: set[asyncio.Task[None]] = set()  # submits a request stopped waiting for

    async def start(self) -> None:
        """Start the publishing and spool-flushing tasks."""
        self._tasks = [
            asyncio.create_task(self._publish_forever()),
            asyncio.create_task(self._flush_forever()),
        ]

    async def submit(self, events: Sequence[PreparedEvent]) -> None:
        """Queue the events, or spool them; never waits for Redis."""
        self._note_work()
        if not self._spooling:
            try:
                self._queue.put_nowait(events)
                return
            except asyncio.QueueFull:
                reason = f"{self._queue.maxsize} hook requests wait to publish"
                await self._spool(events, reason, "queue_full")
                return
        await self._spool(events, _BEHIND_SPOOL, "behind_spool")

    async def keep(self, events: Sequence[PreparedEvent]) -> None:
        """Spool the events behind everything queued before them: on disk once this returns.

        Later requests queue behind them in the spool too, so the order holds; the flush
        publishes them within RETRY_S.
        """
        self._note_work()
        self._spooling = True
        await self._spool([*self._take_queued(), *events], _BEHIND_SPOOL, "durable")

    async def submit_within(
        self, events: Sequence[PreparedEvent], timeout_s: float, *, durable: bool = False
    ) -> str | None:
        """`submit` (`keep` when `durable`), waited for at most `timeout_s`: None once taken,
        else why not (one line).

        A late submit goes on in the background (at most QUEUE_BATCHES of them); past that
        the events are not taken at all.
        """
        if len(self._late) >= self._queue.maxsize:
            return f"{len(self._late)} hook requests already wait for the spool: not published"
        task = asyncio.create_task(self.keep(events) if durable else self.submit(events))
        done, _ = await asyncio.wait([task], timeout=timeout_s)
        if done:
            task.result()
            return None
        self._late.add(task)
        task.add_done_callback(self._late.discard)
        return (
            f"not spooled within {timeout_s:g} s (MEMQ_AGENT_STALL_S): the hook input waits in"
            f" memory for the spool in {self.spool.directory}"
        )

    def stall(self) -> str | None:
        """Why the publisher is stuck (work waits, no progress for MEMQ_AGENT_STALL_S), or None."""
        waiting = self._queue.qsize() + self._busy + self._appending
        idle_s = time.monotonic() - self._progress_at
        if not waiting or idle_s < self.settings.agent_stall_s:
            return None
        return (
            f"the publisher has made no progress for {idle_s:.0f} s with {waiting} hook"
            f" request(s) waiting (MEMQ_AGENT_STALL_S={self.settings.agent_stall_s:g}):"
            f" Redis or the spool in {self.spool.directory} is not answering"
        )

    async def aclose(self) -> None:
        """Publish what is queued (briefly), spool the rest, stop the tasks, close Redis.

        Takes at most 2 * DRAIN_S: a spool that does not answer (a hung disk) is given up on.
        """
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), DRAIN_S)
        try:
            await asyncio.wait_for(self._stop_tasks(), DRAIN_S)
        except TimeoutError:
            logger.error(
                "stopping with %d hook request(s) not spooled: the spool in %s is not answering",
                self._queue.qsize() + self._busy + self._appending,
                self.spool.directory,
            )
        if self._late:
            logger.error(
                "stopping with %d hook request(s) still waiting for the spool in %s: not published",
                len(self._late),
                self.spool.directory,
            )
        if self._producer is not None:
            await self._producer.aclose()
            self._producer = None

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        left = self._take_queued()
        if left:
            await self._spool(left, "memq agent stopping", "stopping")

    async def _publish_forever(self) -> None:
        while True:
            batch = list(await self._queue.get())
            self._progress_at = time.monotonic()
            taken = 1
            while len(batch) < _BATCH_EVENTS and not self._queue.empty():
                batch.extend(self._queue.get_nowait())
                taken += 1
            self._busy += 1
            try:
                await self._publish(batch)
            except asyncio.CancelledError:
                # Perhaps published already: a flush skips an event id it has seen.
                await asyncio.shield(self._spool(batch, "memq agent stopping", "stopping"))
                raise
            finally:
                self._busy -= 1
                self._progress_at = time.monotonic()
                for _ in range(taken):
                    self._queue.task_done()

    async def _publish(self, batch: list[PreparedEvent]) -> None:
        if self._spooling:  # behind events already spooled, so the order holds
            await self._spool(batch, _BEHIND_SPOOL, "behind_spool")
            return
        try:
            producer = await self._connect()
            results = await producer.publish_many(batch)
        except PublishRefusedError as e:
            self._count_published(e.results)
            refused = [ev for ev, r in zip(batch, e.results, strict=True) if r.status == "refused"]
            self._spooling = True
            await self._spool(refused, str(e), "backpressure")
        except (RedisUnavailableError, ConfigError) as e:
            self._spooling = True
            await self._spool(batch + self._take_queued(), f"Redis unavailable ({e})", _kind(e))
        except Exception as e:
            # Anything else (a bug, a reply we did not expect) must not end the publishing
            # task: the batch and what waits behind it go to the spool, in order.
            logger.exception("publishing failed: %s", e)
            self._spooling = True
            reason = f"publish failed ({type(e).__name__})"
            await self._spool(batch + self._take_queued(), reason, "publish_failed")
        else:
            self._count_published(results)

    def _count_published(self, results: Sequence[PublishResult]) -> None:
        self.metrics.published.inc(sum(r.status == "added" for r in results))

    async def _connect(self) -> Producer:
        if self._producer is None:
            self._producer = await Producer.connect(
                self.settings, timeout_ms=self.settings.hook_redis_timeout_ms
            )
        return self._producer

    async def _flush_forever(self) -> None:
        while True:
            await asyncio.sleep(RETRY_S)
            if self._spooling or self.spool.pending():
                self._spooling = True
                result = await asyncio.to_thread(self._flush)
                done = result is not None and not result.stopped
                if done and not self._appending and not self.spool.pending():
                    self._spooling = False
                    logger.info("spool empty: publishing hook events straight to Redis again")

    def _flush(self) -> FlushResult | None:
        try:
            with SyncProducer.connect(
                self.settings, timeout_ms=self.settings.hook_redis_timeout_ms
            ) as producer:
                result = self.spool.flush(producer)
        except (RedisUnavailableError, ConfigError) as e:
            # Retried every RETRY_S: one warning per outage (a failover, a replica missing for
            # MEMQ_PUBLISH_WAIT_REPLICAS), then quiet until a flush goes through again.
            level = logging.DEBUG if self._flush_failing else logging.WARNING
            self._flush_failing = True
            logger.log(level, "spool not flushed, retrying every %g s: %s", RETRY_S, e)
            return None
        self._flush_failing = False
        if result is not None:
            # A duplicate left the spool too: Redis held it already (a publish whose WAIT saw
            # too few replicas, or whose answer a timeout cut off, had landed).
            self.metrics.flushed.inc(result.published + result.duplicates)
        if result is not None and result.published:
            logger.info("published %d spooled event(s)", result.published)
        if result is not None and result.refused:
            logger.warning("%s; %d event(s) stay spooled", result.refused, result.remaining)
        return result

    def _note_work(self) -> None:
        # Work arriving after a quiet spell: the stall is counted from now, not from then.
        if not (self._queue.qsize() or self._busy or self._appending):
            self._progress_at = time.monotonic()

    def _take_queued(self) -> list[PreparedEvent]:
        events: list[PreparedEvent] = []
        while not self._queue.empty():
            events.extend(self._queue.get_nowait())
            self._queue.task_done()
        return events

    async def _spool(self, events: Sequence[PreparedEvent], reason: str, kind: str) -> None:
        """Append `events` to the spool; `reason` for the log line, `kind` for the metric."""
        if not events:
            return
        self._note_work()
        self._appending += 1
        try:
            async with self._append_order:
                # An append fsyncs: off the event loop, so other requests are answered meanwhile.
                kept = await asyncio.to_thread(self.spool.append, events)
            self._progress_at = time.monotonic()
        finally:
            self._appending -= 1
        self.metrics.spooled.labels(kind).inc(kept)
        self.metrics.dropped.inc(len(events) - kept)
        # Every request spools while Redis is away: one line per event would flood the log.
        level = logging.DEBUG if reason == _BEHIND_SPOOL else logging.WARNING
        logger.log(level, "%s: %d event(s) spooled in %s", reason, kept, self.spool.path)


def _kind(e: RedisUnavailableError | ConfigError) -> str:
    """The spool metric's reason for a publish Redis did not take."""
    if isinstance(e, PublishNotReplicatedError):
        return "not_replicated"
    if isinstance(e, RedisUnavailableError):
        return "redis_unavailable"
    return "publish_failed"  # a ConfigError: the URL or credentials are wrong
