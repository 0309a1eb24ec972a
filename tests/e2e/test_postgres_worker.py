"""The worker end to end on PostgreSQL: publish → worker → PostgreSQL → feed, nothing in SQLite."""

from __future__ import annotations

from pathlib import Path

from arq.connections import ArqRedis

from pipeline.events import Event
from tests.support.fake_observer import FakeObserver
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.worker_harness import (
    drain,
    end,
    make_settings,
    prompt,
    publish,
    running_runtime,
    summarize,
    tool_call,
)
from worker.storage.postgres.store import PostgresStore


async def test_a_session_is_stored_end_to_end_in_postgresql(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    postgres_server: PostgresServer,
) -> None:
    url = await postgres_server.create_database()
    settings = make_settings(tmp_path, redis_url, fake_observer.url, database_url=url)
    events: list[Event] = [
        prompt("s1", 1, "fix the login test"),
        *[tool_call("s1", n) for n in range(1, 4)],
        summarize("s1"),
        end("s1"),
    ]
    await publish(arq_redis, settings, *events)
    async with running_runtime(settings, arq_redis) as rt:
        assert await drain(rt, arq_redis) >= 1
    store = PostgresStore(url)
    try:
        rows = await store.observations(memory_session_id="s1")
        (session,) = await store.sessions()
        counts = await store.counts()
        processed = await store.processed_event_ids("s1", [e.event_id for e in events])
        timeline = await store.timeline("s1")
    finally:
        await store.aclose()
        await postgres_server.drop_database(url)
    assert sorted(r.kind for r in rows) == ["observation"] * 3 + ["summary"]
    assert (session.memory_session_id, session.prompts, session.observations) == ("s1", 1, 3)
    assert session.summaries == 1
    assert session.ended_at is not None
    assert counts.input_tokens > 0
    assert processed == {e.event_id for e in events}
    assert timeline[0].kind == "prompt"
    assert await arq_redis.xlen(rt.keys.feed) == 4
    assert not (tmp_path / "memq.db").exists()
