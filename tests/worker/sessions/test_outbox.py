"""Stored ⇒ announced exactly once: the outbox against a real redis-server and a real SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from tests.support.feed_rows import observation, store_rows, summary
from worker.keys import Keys
from worker.sessions.outbox import Outbox
from worker.storage.sqlite.store import SqliteStore
from worker.telemetry.metrics import Metrics

KEYS = Keys("ob")


@pytest.fixture(name="store")
async def _fix_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "memq.db")
    await store.migrate()
    yield store
    await store.aclose()


async def _feed(redis: aioredis.Redis) -> list[tuple[str, int]]:
    entries = await redis.xrange(KEYS.feed)
    return [(f[b"kind"].decode(), int(f[b"id"])) for _, f in entries]


async def test_every_stored_row_is_announced_once_in_order_whoever_flushes(
    redis: aioredis.Redis, store: SqliteStore
) -> None:
    metrics = Metrics()
    # A small batch, so one flush takes several rounds.
    outbox = Outbox(redis, KEYS, store, feed_maxlen=1000, metrics=metrics, batch_rows=2)
    mine = await store_rows(
        store,
        session="s1",
        observations=[observation(n, session="s1") for n in (1, 2, 3)],
        summaries=[summary(4, "wrap up", session="s1")],
    )
    theirs = await store_rows(store, session="s2", observations=[observation(5, session="s2")])
    pubsub = redis.pubsub()
    await pubsub.subscribe(KEYS.observations)
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    assert await outbox.flush("s1", late="session") == 4
    assert await _feed(redis) == [(r.kind, r.id) for r in mine]
    published = [await pubsub.get_message(timeout=1) for _ in mine]
    assert [m["data"] for m in published if m] == [
        (await redis.xrange(KEYS.feed))[i][1][b"payload"] for i in range(4)
    ]
    # Announced rows left the outbox: flushing again (any session) announces only the rest.
    assert await store.unannounced(memory_session_id="s1") == []
    assert await outbox.flush() == 1
    assert await outbox.flush() == 0
    assert await outbox.flush("s1") == 0
    assert await _feed(redis) == [(r.kind, r.id) for r in [*mine, *theirs]]
    assert await store.unannounced() == []
    # Only the flush that was told the rows were left by a failure counts them as late.
    text = metrics.render().decode()
    assert 'memq_recovered_announcements_total{by="session"} 4.0' in text
    assert 'memq_recovered_announcements_total{by="startup"} 0.0' in text
    await pubsub.aclose()


async def test_rows_stay_in_the_outbox_when_redis_refuses_them(
    redis: aioredis.Redis, store: SqliteStore
) -> None:
    rows = await store_rows(store, session="s1", observations=[observation(1, session="s1")])
    await redis.set(KEYS.feed, "not a stream")  # the XADD fails: WRONGTYPE
    outbox = Outbox(redis, KEYS, store, feed_maxlen=1000)
    with pytest.raises(ResponseError):
        await outbox.flush("s1")
    assert await store.unannounced() == rows
    await redis.delete(KEYS.feed)
    assert await outbox.flush("s1") == 1
    assert await _feed(redis) == [("observation", rows[0].id)]


async def test_rows_a_commit_announced_in_its_own_round_trip_are_not_flushed_again(
    redis: aioredis.Redis, store: SqliteStore
) -> None:
    outbox = Outbox(redis, KEYS, store, feed_maxlen=1000)
    rows = await store_rows(store, session="s1", observations=[observation(1, session="s1")])
    pipe = redis.pipeline(transaction=False)
    pipe.set("the commit's other commands", 1)
    outbox.queue(pipe, rows)
    await pipe.execute()
    assert await store.unannounced() == rows  # until the round trip is known to have run
    await outbox.sent(rows)
    assert await outbox.flush() == 0
    assert await _feed(redis) == [("observation", rows[0].id)]
