"""Crashes and shutdowns: kill -9 mid-batch, SIGTERM mid-turn, a crash between store and ack."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from pipeline.outcomes import JobResult
from tests.support.fake_observer import FakeObserver
from tests.support.feed_rows import observation, store_rows
from tests.support.worker_checks import observations, unacked, wait_until
from tests.support.worker_harness import (
    drain,
    make_settings,
    publish,
    running_runtime,
    sqlite_store,
    tool_call,
)
from tests.support.worker_process import WorkerProcess, forget_cron_jobs, worker_env
from worker.keys import CONSUMER_GROUP, Keys
from worker.queue.streams import SessionStream
from worker.sessions.jobs import build_runtime, close_runtime
from worker.sessions.session_run import observe
from worker.settings import Settings
from worker.storage.records import BatchWrite
from worker.telemetry.metrics import Metrics

JOB_TIMEOUT_S = 6
SMALL = {"batch_max_events": "4", "job_timeout_s": str(JOB_TIMEOUT_S)}


async def _stored_count(settings: Settings, total: int) -> bool:
    return len(await observations(settings)) >= total


async def _assert_each_call_stored_once(
    settings: Settings, calls: int, sessions: list[str]
) -> None:
    rows = await observations(settings)
    assert len(rows) == calls
    titles = Counter((r.memory_session_id, r.title) for r in rows)
    assert max(titles.values()) == 1
    assert {r.memory_session_id for r in rows} == set(sessions)


async def _wait_for_requests(fake: FakeObserver, n: int, timeout_s: float = 30.0) -> None:
    await asyncio.to_thread(fake.wait_for_requests, n, timeout_s)


@pytest.mark.slow
async def test_kill_9_mid_batch_then_restart_stores_every_event_exactly_once(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, **SMALL)
    env = worker_env(tmp_path, redis_url, fake_observer, **SMALL)
    first = WorkerProcess(env, tmp_path / "first.log")
    second: WorkerProcess | None = None
    try:
        first.wait_for_log("redis_version")
        fake_observer.hold()
        await publish(arq_redis, settings, *[tool_call(s, n) for s in ("k1", "k2")
                                             for n in range(6)])  # fmt: skip
        await _wait_for_requests(fake_observer, 2)  # both sessions are mid-batch
        first.signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
        killed_at = time.monotonic()
        fake_observer.release()  # the replies go nowhere: their worker is gone
        assert len(await observations(settings)) == 0
        second = WorkerProcess(env, tmp_path / "second.log")
        await wait_until(
            lambda: _stored_count(settings, 12),
            timeout_s=JOB_TIMEOUT_S + 30,
            what="every event stored after the restart",
        )
        delay = time.monotonic() - killed_at
    finally:
        fake_observer.release()
        first.stop()
        if second is not None:
            second.stop()
    assert delay <= JOB_TIMEOUT_S + 20
    await _assert_each_call_stored_once(settings, 12, ["k1", "k2"])
    for session in ("k1", "k2"):
        assert await unacked(arq_redis, settings, session) == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("reply_never_comes", [False, True])
async def test_sigterm_mid_turn_exits_cleanly_and_the_rest_is_stored_once_later(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    reply_never_comes: bool,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, **SMALL)
    env = worker_env(tmp_path, redis_url, fake_observer, **SMALL)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        worker.wait_for_log("redis_version")
        fake_observer.hold()
        await publish(arq_redis, settings, *[tool_call("t1", n) for n in range(10)])
        await _wait_for_requests(fake_observer, 1)
        worker.signal(signal.SIGTERM)
        signalled = time.monotonic()
        if not reply_never_comes:
            await asyncio.sleep(0.3)
            fake_observer.release()  # the turn in hand completes; no new turn starts
        code = await asyncio.to_thread(worker.wait, JOB_TIMEOUT_S + 15)
        took = time.monotonic() - signalled
    finally:
        fake_observer.release()
        worker.stop()
    assert code == 0, worker.log()
    assert len(fake_observer.requests) == 1, "no turn may start after SIGTERM"
    stored = await observations(settings, "t1")
    if reply_never_comes:
        # The call ran out of the job's time: nothing of that turn was written, its entries
        # stay pending for the next holder of the session.
        assert stored == []
        assert took < JOB_TIMEOUT_S + 2
        assert await unacked(arq_redis, settings, "t1") == (10, 4)
    else:
        assert len(stored) == 4
        assert took < JOB_TIMEOUT_S
        assert await unacked(arq_redis, settings, "t1") == (6, 0)
    await forget_cron_jobs(arq_redis, settings.prefix)
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    await _assert_each_call_stored_once(settings, 10, ["t1"])
    assert await unacked(arq_redis, settings, "t1") == (0, 0)


async def test_events_stored_before_a_crash_are_acked_without_asking_again(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    calls = [tool_call("c1", n) for n in range(3)]
    await publish(arq_redis, settings, *calls)
    # A worker read the first two events, committed their batch and died before acking it.
    stream = Keys(settings.prefix).events("c1")
    await SessionStream(arq_redis, Keys(settings.prefix), "c1", "crashed").ensure_group()
    await arq_redis.xreadgroup(CONSUMER_GROUP, "crashed", {stream: ">"}, count=2)
    store = sqlite_store(settings)
    try:
        await store.migrate()
        await store.write_batch(BatchWrite(
            memory_session_id="c1", project="demo", fence=0,
            event_ids=[c.event_id for c in calls[:2]],
        ))  # fmt: skip
    finally:
        await store.aclose()
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    (request,) = fake_observer.requests
    assert request.user.count("<observed_from_primary_session>") == 1
    assert "echo step 2" in request.user
    assert len(await observations(settings, "c1")) == 1
    assert await unacked(arq_redis, settings, "c1") == (0, 0)


async def test_a_broken_store_backs_off_instead_of_spinning_then_recovers(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url,
                             retry_base_s="0.2", retry_max_s="0.4")  # fmt: skip
    db = settings.data_path / "memq.db"
    await publish(arq_redis, settings, tool_call("b1", 1))
    async with running_runtime(settings, arq_redis) as rt:
        # The database becomes unusable (a directory where the file was): every job fails.
        await rt.store.aclose()
        db.rename(db.with_suffix(".moved"))
        db.mkdir()
        worker = asyncio.create_task(drain(rt, arq_redis, timeout_s=20))
        try:
            await asyncio.sleep(1.0)
            runs = int(await arq_redis.get(rt.keys.job_sequence("b1")) or 0)
            # Backing off (0.2 s, 0.4 s, 0.4 s…): a handful of runs, not a hot loop of hundreds.
            assert 2 <= runs <= 6
            db.rmdir()
            db.with_suffix(".moved").rename(db)
        finally:
            await worker
    assert len(await observations(settings, "b1")) == 1


async def test_a_second_run_of_a_busy_session_stands_aside(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    # arq re-runs a job whose worker is only slow: the lease keeps the two runs apart.
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await publish(arq_redis, settings, *[tool_call("b1", n) for n in range(3)])
    async with running_runtime(settings, arq_redis) as rt:
        job_id = rt.keys.job_id("b1", 1)
        assert await arq_redis.get(rt.keys.scheduled("b1")) == job_id.encode()
        fake_observer.hold()
        slow = asyncio.create_task(observe(rt, "b1", job_id))
        try:
            await _wait_for_requests(fake_observer, 1)
            assert await observe(rt, "b1", job_id) is JobResult.BUSY
            # It asks to look again once the holder's lease could have expired.
            later = rt.keys.job_id("b1", 2)
            assert await arq_redis.get(rt.keys.scheduled("b1")) == later.encode()
            score = await arq_redis.zscore(rt.keys.queue, later)
            assert score is not None
            assert score / 1000 - time.time() > rt.lease_ttl_ms / 1000 - 2
        finally:
            fake_observer.release()
            assert await slow is JobResult.DRAINED
    assert len(fake_observer.requests) == 1
    assert len(await observations(settings, "b1")) == 3


async def test_a_starting_worker_announces_rows_a_crash_left_unannounced(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    store = sqlite_store(settings)
    try:
        await store.migrate()
        # Committed, then the worker died before its announce ran.
        rows = [observation(1, session="u1"), observation(2, session="u1")]
        await store_rows(store, session="u1", observations=rows)
    finally:
        await store.aclose()
    metrics = Metrics()
    rt = await build_runtime(settings, arq_redis, metrics)
    try:
        feed = await rt.redis.xrange(rt.keys.feed)
    finally:
        await close_runtime(rt)
    assert [e[1][b"id"] for e in feed] == [b"1", b"2"]
    assert 'memq_recovered_announcements_total{by="startup"} 2.0' in metrics.render().decode()
    check = sqlite_store(settings)
    try:
        assert await check.unannounced() == []
    finally:
        await check.aclose()
