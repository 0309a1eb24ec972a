"""Between a commit and its ack (a takeover, a lost Redis): rows announced once, nothing redone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from arq.connections import ArqRedis
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from pipeline.outcomes import JobResult
from tests.support.fake_observer import FakeObserver
from tests.support.worker_checks import observations, unacked
from tests.support.worker_harness import (
    drain,
    make_settings,
    publish,
    running_runtime,
    sqlite_store,
    tool_call,
)
from worker.keys import Keys
from worker.sessions.session_run import observe
from worker.storage.records import BatchResult, BatchWrite
from worker.storage.sqlite.store import SqliteStore
from worker.telemetry.metrics import Metrics


class _TakenOverAfterCommit(SqliteStore):
    """The worker's real store; right after the first commit another worker takes the lease
    (what a long GC pause or a network partition does to a live worker)."""

    def __init__(self, path: Path, redis: Redis, keys: Keys) -> None:
        super().__init__(path)
        self.redis = redis
        self.keys = keys
        self.taken = False

    async def write_batch(self, batch: BatchWrite) -> BatchResult:
        result = await super().write_batch(batch)
        if not self.taken:
            self.taken = True
            await self.redis.set(self.keys.lease(batch.memory_session_id), "999999")
        return result


async def test_rows_committed_before_a_takeover_are_announced_at_once_and_not_redone(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await publish(arq_redis, settings, tool_call("t1", 0), tool_call("t1", 1))
    async with running_runtime(settings, arq_redis) as rt:
        store = _TakenOverAfterCommit(settings.data_path / "memq.db", rt.redis, rt.keys)
        try:
            taken_over = dataclasses.replace(rt, store=store)
            assert await observe(taken_over, "t1", rt.keys.job_id("t1", 1)) is JobResult.FENCED
        finally:
            await store.aclose()
        # The run above was called directly: only its hand-off stays queued (left there, the
        # stale job raced the hand-off, which found the lease held and waited out its TTL).
        await rt.redis.zrem(rt.keys.queue, rt.keys.job_id("t1", 1))
        feed = await rt.redis.xrange(rt.keys.feed)
    # Stored and announced though the ack was refused; the entries stay for the lease holder.
    assert len(await observations(settings, "t1")) == 2
    assert len(feed) == 2
    check = sqlite_store(settings)
    try:
        assert await check.unannounced() == []
    finally:
        await check.aclose()
    assert await unacked(arq_redis, settings, "t1") == (2, 2)
    # The other holder's lease ends; the next job acks the processed entries without asking.
    await arq_redis.delete(Keys(settings.prefix).lease("t1"))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
        feed = await rt.redis.xrange(rt.keys.feed)
    assert len(fake_observer.requests) == 1
    assert len(await observations(settings, "t1")) == 2
    assert len(feed) == 2
    assert await unacked(arq_redis, settings, "t1") == (0, 0)


class _RedisLostAfterCommit(SqliteStore):
    """The worker's real store; Redis goes away right after the first commit, so that turn's
    announce-and-ack round trip fails (the job ends in error, its entries stay pending)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.failed = False

    async def write_batch(self, batch: BatchWrite) -> BatchResult:
        result = await super().write_batch(batch)
        if not self.failed:
            self.failed = True
            raise RedisConnectionError("Connection reset by peer")
        return result


async def test_rows_whose_announce_failed_after_commit_go_out_with_the_next_job(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await publish(arq_redis, settings, tool_call("r1", 0), tool_call("r1", 1))
    async with running_runtime(settings, arq_redis) as rt:
        store = _RedisLostAfterCommit(settings.data_path / "memq.db")
        try:
            metrics = Metrics()
            lost = dataclasses.replace(rt, store=store, metrics=metrics)
            assert await observe(lost, "r1", rt.keys.job_id("r1", 1)) is JobResult.ERROR
            # The failed job's own error path announces what it stored once Redis answers
            # again (here at once); the entries stay pending.
            assert await rt.redis.xlen(rt.keys.feed) == 2
            assert await unacked(arq_redis, settings, "r1") == (2, 2)
            # The next job (no restart in between) finds the entries stored: it acks them
            # without asking the observer again, and announces nothing twice.
            assert await observe(lost, "r1", rt.keys.job_id("r1", 2)) is JobResult.DRAINED
        finally:
            await store.aclose()
        feed = await rt.redis.xrange(rt.keys.feed)
    assert len(fake_observer.requests) == 1
    assert len(await observations(settings, "r1")) == 2
    assert sorted(e[1][b"id"] for e in feed) == [b"1", b"2"]
    assert 'memq_recovered_announcements_total{by="session"} 2.0' in metrics.render().decode()
    assert await unacked(arq_redis, settings, "r1") == (0, 0)
    check = sqlite_store(settings)
    try:
        assert await check.unannounced() == []
    finally:
        await check.aclose()
