"""One session job (`observe`) on its own, built from real parts: redis-server, SQLite, the fake
observer. Entries are decoded, dead-lettered, replay-guarded and run as turns, in order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import Event, encode_event
from pipeline.outcomes import JobResult
from pipeline.prompting.mode_files import load_mode
from tests.support.fake_observer import FakeObserver
from tests.support.feed_rows import observation
from tests.support.worker_harness import end, make_settings, prompt, summarize, tool_call
from worker.ingest.producer import event_publish_args
from worker.keys import CONSUMER_GROUP
from worker.observers.factory import build_observer
from worker.queue.streams import SessionStream
from worker.sessions.jobs import observe_session
from worker.sessions.runtime import Runtime
from worker.sessions.session_run import observe
from worker.storage.records import BatchWrite
from worker.storage.sqlite.store import SqliteStore
from worker.telemetry.metrics import Metrics

SESSION = "r1"


@pytest.fixture(name="rt")
async def _fix_runtime(
    tmp_path: Path, redis: aioredis.Redis, redis_url: str, fake_observer: FakeObserver
) -> AsyncIterator[Runtime]:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    store = SqliteStore(tmp_path / "memq.db")
    await store.migrate()
    observer = build_observer(settings)
    rt = Runtime.build(
        settings=settings, redis=redis, store=store, observer=observer,
        mode=load_mode("code"), consumer="c1", metrics=Metrics(),
    )  # fmt: skip
    yield rt
    await observer.aclose()
    await store.aclose()


async def _publish(rt: Runtime, *events: Event) -> None:
    s = rt.settings
    for event in events:
        status, _ = await rt.scheduler.publish(
            event_publish_args(rt.keys, s, event, encode_event(event))
        )
        assert status == 1


async def test_a_session_runs_in_order_with_its_bad_entries_dead_lettered(
    rt: Runtime, fake_observer: FakeObserver
) -> None:
    stream = rt.keys.events(SESSION)
    await rt.redis.xadd(stream, {"event": b"{not json"})
    await rt.redis.xadd(stream, {"other": b"no event field"})
    await rt.redis.xadd(stream, {"event": encode_event(tool_call("elsewhere", 1))})
    await _publish(
        rt,
        prompt(SESSION, 1, "fix the build"),
        tool_call(SESSION, 2),
        tool_call(SESSION, 3),
        summarize(SESSION),
        end(SESSION),
    )
    assert await observe(rt, SESSION, rt.keys.job_id(SESSION, 1)) is JobResult.ENDED
    dead = await rt.redis.xrange(rt.keys.dead)
    reasons = [f[b"reason"].decode() for _, f in dead]
    assert len(reasons) == 3
    assert "stream entry has no 'event' field" in reasons
    assert "event of session elsewhere in stream of r1" in reasons
    assert (await rt.counters.outcomes())["dead"] == 3
    # One observer call for the two tool calls, one for the summary: in publish order.
    requests = fake_observer.requests
    assert len(requests) == 2
    assert "fix the build" in requests[0].system
    assert await rt.redis.exists(stream) == 0  # ended and drained: the stream is gone
    rows = await rt.store.observations(memory_session_id=SESSION)
    assert {r.kind for r in rows} == {"observation", "summary"}
    assert await rt.store.unannounced() == []
    feed = await rt.redis.xrange(rt.keys.feed)
    announced = [(f[b"kind"].decode(), int(f[b"id"])) for _, f in feed]
    assert sorted(announced) == sorted((r.kind, r.id) for r in rows)  # each once
    assert announced[-1][0] == "summary"  # the summary turn came last


async def test_entries_stored_before_a_crash_are_announced_and_acked_without_the_observer(
    rt: Runtime, fake_observer: FakeObserver
) -> None:
    calls = [tool_call(SESSION, 1), tool_call(SESSION, 2)]
    await _publish(rt, *calls)
    # A worker read them, committed, and died before announcing and acking.
    dead_worker = SessionStream(rt.redis, rt.keys, SESSION, "dead-worker")
    await dead_worker.ensure_group()
    assert len(await dead_worker.read(10)) == 2
    await rt.store.write_batch(
        BatchWrite(
            memory_session_id=SESSION, project="demo", fence=1,
            event_ids=[c.event_id for c in calls],
            observations=[observation(1, session=SESSION), observation(2, session=SESSION)],
        )
    )  # fmt: skip
    assert await observe(rt, SESSION, rt.keys.job_id(SESSION, 1)) is JobResult.DRAINED
    assert fake_observer.requests == []
    assert await rt.redis.xlen(rt.keys.feed) == 2
    assert await rt.store.unannounced() == []
    pending = await rt.redis.xpending(rt.keys.events(SESSION), CONSUMER_GROUP)
    assert pending["pending"] == 0
    assert rt.metrics is not None
    text = rt.metrics.render().decode()
    assert 'memq_recovered_announcements_total{by="session"} 2.0' in text


async def test_arq_receives_the_job_result_as_a_plain_string(rt: Runtime) -> None:
    # arq logs repr(result): a plain 'drained', never <JobResult.DRAINED: 'drained'>.
    await _publish(rt, prompt(SESSION, 1, "fix the build"))
    job_id = rt.keys.job_id(SESSION, 1)
    result = await observe_session({"runtime": rt, "job_id": job_id}, SESSION)
    assert type(result) is str
    assert repr(result) == "'drained'"
