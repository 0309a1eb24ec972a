"""A session job whose Redis goes away (a failover, a restart): one log line, no traceback, and
nothing lost. The entries stay pending; the sweep (or the next job) takes the session again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from pipeline.events import encode_event
from pipeline.outcomes import JobResult
from pipeline.prompting.mode_files import load_mode
from tests.support.fake_observer import FakeObserver
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer
from tests.support.worker_harness import make_settings, tool_call
from worker.ingest.producer import event_publish_args
from worker.keys import CONSUMER_GROUP
from worker.observers.factory import build_observer
from worker.sessions.jobs import observe_session, sweep_sessions
from worker.sessions.runtime import Runtime
from worker.sessions.session_run import observe
from worker.storage.sqlite.store import SqliteStore

SESSION = "lost"


async def _runtime(tmp_path: Path, redis_url: str, observer_url: str) -> Runtime:
    settings = make_settings(tmp_path, redis_url, observer_url)
    store = SqliteStore(tmp_path / "memq.db")
    await store.migrate()
    # One quick reconnect: the worker's own pool rides out ~7.5 s first, which is not the point.
    redis = aioredis.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 1))
    return Runtime.build(
        settings=settings, redis=redis, store=store, observer=build_observer(settings),
        mode=load_mode("code"), consumer="c1",
    )  # fmt: skip


@pytest.fixture(name="rt_factory")
async def _fix_rt_factory() -> AsyncIterator[list[Runtime]]:
    made: list[Runtime] = []
    yield made
    for rt in made:
        await rt.observer.aclose()
        await rt.store.aclose()
        await rt.redis.aclose()


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("worker.")]


async def test_a_job_and_a_sweep_that_find_no_redis_say_so_in_one_line(
    tmp_path: Path,
    fake_observer: FakeObserver,
    rt_factory: list[Runtime],
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt = await _runtime(tmp_path, f"redis://127.0.0.1:{free_port()}/0", fake_observer.url)
    rt_factory.append(rt)
    job = {"runtime": rt, "job_id": rt.keys.job_id(SESSION, 1)}
    with caplog.at_level(logging.INFO, logger="worker"):
        assert await observe_session(job, SESSION) == "error"
        assert await sweep_sessions({"runtime": rt}) == 0
    lines = _lines(caplog)
    assert len(lines) == 2, lines
    assert lines[0].startswith("session job cut off before it began, Redis lost: ")
    assert lines[1].startswith("sweep cut off, Redis lost: ")
    assert not [r for r in caplog.records if r.exc_info]


async def test_redis_killed_while_a_turn_waits_on_the_observer_loses_nothing(
    tmp_path: Path,
    fake_observer: FakeObserver,
    rt_factory: list[Runtime],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    try:
        rt = await _runtime(tmp_path / "w", server.url, fake_observer.url)
        rt_factory.append(rt)
        calls = [tool_call(SESSION, n) for n in range(2)]
        for call in calls:
            status, _ = await rt.scheduler.publish(
                event_publish_args(rt.keys, rt.settings, call, encode_event(call))
            )
            assert status == 1
        fake_observer.hold()
        with caplog.at_level(logging.INFO, logger="worker"):
            job = asyncio.create_task(observe(rt, SESSION, rt.keys.job_id(SESSION, 1)))
            await asyncio.to_thread(fake_observer.wait_for_requests, 1)
            await asyncio.to_thread(server.stop, kill=True)
            fake_observer.release()
            # Stored, then cut off acking and handing the session on: it ends all the same.
            assert await asyncio.wait_for(job, 30) is JobResult.ERROR
        lines = _lines(caplog)
        assert [r for r in caplog.records if r.exc_info] == []
        assert any(m.startswith("session job could not hand the session on") for m in lines)
        await asyncio.to_thread(server.start)
        pending = await rt.redis.xpending(rt.keys.events(SESSION), CONSUMER_GROUP)
        assert pending["pending"] == 2  # kept for the next job, not acked nor dead-lettered
        # The cut-off job's lease outlives it (a TTL of 10 s: the next job would wait for it).
        await rt.redis.delete(rt.keys.lease(SESSION))  # as its TTL does, a few seconds on
        assert await observe(rt, SESSION, rt.keys.job_id(SESSION, 2)) is JobResult.DRAINED
        assert len(fake_observer.requests) == 1  # the replay guard: the paid reply counts once
        rows = await rt.store.observations(memory_session_id=SESSION)
        assert len(rows) == 2
        assert await rt.redis.xlen(rt.keys.dead) == 0
    finally:
        server.stop()
