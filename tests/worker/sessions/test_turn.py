"""The TurnRunner on its own, built from real parts: a redis-server, SQLite, the fake observer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import redis.asyncio as aioredis

from pipeline.events import Event, encode_event
from pipeline.outcomes import Outcome, TurnResult
from pipeline.prompting.conversation import ObserverState
from pipeline.prompting.mode_files import load_mode
from pipeline.turns.batching import TurnPlan, plan_turns
from tests.support.fake_observer import FakeObserver, Reply
from tests.support.worker_harness import make_settings, prompt, summarize, tool_call
from worker.keys import CONSUMER_GROUP
from worker.observers.factory import build_observer
from worker.queue.leases import Lease
from worker.queue.streams import Entry, SessionStream
from worker.sessions.runtime import Runtime
from worker.sessions.turn import TurnRunner
from worker.storage.sqlite.store import SqliteStore

SESSION = "t1"
OBSERVATION = (
    "<observation><type>discovery</type><title>Ran the build</title>"
    "<narrative>It passed.</narrative></observation>"
)


@pytest.fixture(name="rt")
async def _fix_runtime(
    tmp_path: Path, redis: aioredis.Redis, redis_url: str, fake_observer: FakeObserver
) -> AsyncIterator[Runtime]:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, max_attempts="2")
    store = SqliteStore(tmp_path / "memq.db")
    await store.migrate()
    observer = build_observer(settings)
    rt = Runtime.build(
        settings=settings, redis=redis, store=store, observer=observer,
        mode=load_mode("code"), consumer="c1",
    )  # fmt: skip
    yield rt
    await observer.aclose()
    await store.aclose()


class Session(msgspec.Struct):
    """One session's lease, stream and runner."""

    lease: Lease
    stream: SessionStream
    runner: TurnRunner


@pytest.fixture(name="session")
async def _fix_session(rt: Runtime) -> AsyncIterator[Session]:
    lease = await Lease.acquire(rt.redis, rt.keys, SESSION, rt.lease_ttl_ms)
    assert lease is not None
    stream = SessionStream(rt.redis, rt.keys, SESSION, rt.consumer)
    await stream.ensure_group()
    yield Session(lease, stream, TurnRunner(rt, SESSION, lease, stream, None))
    await lease.release()


async def _delivered(rt: Runtime, s: Session, *events: Event) -> tuple[TurnPlan, list[Entry]]:
    for event in events:
        await rt.redis.xadd(rt.keys.events(SESSION), {"event": encode_event(event)})
    entries = await s.stream.read(10)
    (plan,) = plan_turns(list(events), max_tool_calls=8, max_chars=100_000)
    return plan, entries


def _deadline() -> float:
    return time.monotonic() + 15


async def test_a_stored_turn_writes_announces_acks_and_saves_the_conversation(
    rt: Runtime, session: Session, fake_observer: FakeObserver
) -> None:
    fake_observer.script(Reply(text=OBSERVATION, input_tokens=1200, output_tokens=80))
    plan, entries = await _delivered(
        rt, session, prompt(SESSION, 1, "fix it"), tool_call(SESSION, 2)
    )
    result = await session.runner.run(plan, entries, _deadline())
    assert result == TurnResult(outcome=Outcome.STORED, stored=1)
    (row,) = await rt.store.observations(memory_session_id=SESSION)
    assert row.title == "Ran the build"
    feed = await rt.redis.xrange(rt.keys.feed)
    assert [(f[b"kind"], f[b"id"]) for _, f in feed] == [(b"observation", str(row.id).encode())]
    assert await rt.store.unannounced() == []
    assert (await rt.redis.xpending(rt.keys.events(SESSION), CONSUMER_GROUP))["pending"] == 0
    saved = await rt.states.load(SESSION)
    assert saved is not None
    assert saved == session.runner.state
    assert (saved.prompt_number, saved.told_prompt_number, saved.history) == (1, 1, [])
    assert saved.digest == ["discovery: Ran the build"]  # what the next turn is told
    assert (await rt.counters.outcomes())["stored"] == 1
    # The tokens the API reported, counted once and charged to the day's budget in the
    # commit's round trip (not figures read back from the counters under test).
    assert await rt.counters.tokens() == {"input": 1200, "cached_input": 0, "output": 80}
    assert (await rt.gate.budget.state()).used == 1200 + 80


async def test_a_summary_answered_with_observations_is_reminded_and_both_calls_budgeted(
    rt: Runtime, session: Session, fake_observer: FakeObserver
) -> None:
    summary = "<summary><request>fix it</request><completed>fixed</completed></summary>"
    fake_observer.script(
        Reply(text=OBSERVATION, input_tokens=100, output_tokens=10),
        Reply(text=summary, input_tokens=200, output_tokens=20),
    )
    plan, entries = await _delivered(rt, session, summarize(SESSION))
    result = await session.runner.run(plan, entries, _deadline())
    assert result == TurnResult(outcome=Outcome.STORED, stored=1)
    first, second = fake_observer.requests
    assert len(second.messages) == len(first.messages) + 2  # the first exchange, then this
    assert second.user == rt.mode.prompts.summary_reminder
    assert session.runner.state is not None
    assert session.runner.state.history == []  # no raw history kept (MEMQ_HISTORY_TURNS=0)
    assert session.runner.state.digest == ["summary: fix it"]
    assert (await rt.gate.budget.state()).used == 330
    # Both calls are the turn's usage, so the cost view counts the reminder too.
    tokens = await rt.counters.tokens()
    assert (tokens["input"], tokens["output"]) == (300, 30)


async def test_the_next_batch_is_read_in_the_commits_round_trip_when_asked(
    rt: Runtime, session: Session, fake_observer: FakeObserver
) -> None:
    fake_observer.script(Reply(text=OBSERVATION))
    plan, entries = await _delivered(rt, session, tool_call(SESSION, 1))
    nxt = tool_call(SESSION, 2)
    await rt.redis.xadd(rt.keys.events(SESSION), {"event": encode_event(nxt)})
    await session.runner.run(plan, entries, _deadline(), read_ahead=5)
    # Delivered with the commit: the next read hands it over without claiming it again.
    (entry,) = await session.stream.read(5, claim=False)
    assert entry.raw == encode_event(nxt)


async def test_quota_prose_pauses_the_provider_and_leaves_everything_as_it_was(
    rt: Runtime, session: Session, fake_observer: FakeObserver
) -> None:
    fake_observer.script(Reply(text="Claude usage limit reached. Try again later."))
    plan, entries = await _delivered(rt, session, tool_call(SESSION, 1))
    result = await session.runner.run(plan, entries, _deadline())
    assert (result.outcome, result.stop) == (Outcome.PAUSED, True)
    assert result.defer_s == pytest.approx(rt.settings.quota_pause_s, abs=1)
    assert await rt.pauses.remaining_s(rt.observer.provider) > 0
    assert await rt.store.observations(memory_session_id=SESSION) == []
    assert (await rt.redis.xpending(rt.keys.events(SESSION), CONSUMER_GROUP))["pending"] == 1
    assert await rt.states.load(SESSION) is None
    assert session.runner.state is None
    assert (await rt.counters.outcomes())["paused"] == 1
    assert (await rt.gate.budget.state()).used > 0  # the call answered: its tokens count


async def test_failed_calls_are_retried_then_dead_lettered_with_a_fresh_conversation(
    rt: Runtime, session: Session, fake_observer: FakeObserver
) -> None:
    session.runner.state = ObserverState(system="an old conversation", project="demo")
    plan, entries = await _delivered(rt, session, tool_call(SESSION, 1), tool_call(SESSION, 2))
    fake_observer.script(*[Reply(status=500, error_type="api_error")] * 10)
    first = await session.runner.run(plan, entries, _deadline())
    assert (first.outcome, first.stop) == (Outcome.RETRY, True)
    assert first.defer_s > 0
    assert await rt.redis.xlen(rt.keys.dead) == 0
    second = await session.runner.run(plan, entries, _deadline())  # max_attempts=2
    assert (second.outcome, second.stop) == (Outcome.DEAD, False)
    dead = await rt.redis.xrange(rt.keys.dead)
    assert [f[b"entry_id"].decode() for _, f in dead] == [e.id for e in entries]
    assert (await rt.redis.xpending(rt.keys.events(SESSION), CONSUMER_GROUP))["pending"] == 0
    assert session.runner.state is None
    outcomes = await rt.counters.outcomes()
    assert (outcomes["retry"], outcomes["dead"]) == (1, 2)  # dead: one per entry
