"""The parts a session job is made of, against a real redis-server: streams, leases, fencing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.prompting.conversation import ObserverState
from worker.errors import LeaseLostError
from worker.keys import CONSUMER_GROUP, Keys
from worker.queue.leases import Lease, raise_fence_floor
from worker.queue.streams import SessionStream
from worker.sessions.observer_state import StateStore
from worker.storage.records import BatchWrite, ObservationRow
from worker.storage.sqlite.store import SqliteStore

KEYS = Keys("t")
SESSION = "s1"
NOW = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(name="stream")
async def _fix_stream(redis: aioredis.Redis) -> SessionStream:
    stream = SessionStream(redis, KEYS, SESSION, "consumer-a")
    await stream.ensure_group()
    return stream


@pytest.fixture(name="store")
async def _fix_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "memq.db")
    await store.migrate()
    yield store
    await store.aclose()


async def _add(redis: aioredis.Redis, *values: bytes) -> list[str]:
    return [(await redis.xadd(KEYS.events(SESSION), {"event": v})).decode() for v in values]


def _observation(title: str) -> ObservationRow:
    return ObservationRow(
        memory_session_id=SESSION, project="p", type="discovery", title=title, subtitle=None,
        facts=[], narrative=title, concepts=[], files_read=[], files_modified=[],
        prompt_number=None, content_hash=title, created_at=NOW,
    )  # fmt: skip


async def test_read_returns_pending_entries_first_then_new_ones_in_order(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    ids = await _add(redis, b"1", b"2", b"3")
    assert [e.id for e in await stream.read(2)] == ids[:2]  # delivered, not acked
    more = await _add(redis, b"4")
    # A later reader (the next holder of the lease) takes the pending ones over first.
    other = SessionStream(redis, KEYS, SESSION, "consumer-b")
    got = await other.read(10)
    assert [e.id for e in got] == ids + more
    assert [e.raw for e in got] == [b"1", b"2", b"3", b"4"]
    pending = await redis.xpending_range(KEYS.events(SESSION), CONSUMER_GROUP, "-", "+", 10)
    assert {p["consumer"] for p in pending} == {b"consumer-b"}
    # Only the taken-over ones may have been stored by a holder that died before acking.
    assert [e.claimed for e in got] == [True, True, False, False]


async def test_entries_read_without_claiming_are_new(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    await _add(redis, b"1")
    assert [e.claimed for e in await stream.read(5)] == [False]
    await _add(redis, b"2")
    assert [(e.raw, e.claimed) for e in await stream.read(5, claim=False)] == [(b"2", False)]
    # Neither was acked: a claiming read takes both over again, as delivered before.
    assert [(e.raw, e.claimed) for e in await stream.read(5)] == [(b"1", True), (b"2", True)]


async def test_an_entry_without_an_event_field_reads_as_none(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    await redis.xadd(KEYS.events(SESSION), {"other": b"x"})
    (entry,) = await stream.read(5)
    assert entry.raw is None
    assert entry.published_ms > 0


async def test_ack_deletes_the_entries_for_the_lease_holder(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    ids = await _add(redis, b"1", b"2", b"3")
    lease = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert lease is not None
    try:
        await stream.read(3)
        await stream.ack(lease.token, ids[:2])
        assert await redis.xlen(KEYS.events(SESSION)) == 1
        assert [e.id for e in await stream.read(3)] == ids[2:]
    finally:
        await lease.release()


async def test_dead_letter_moves_entries_with_their_reason(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    (bad,) = await _add(redis, b"{broken")
    lease = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert lease is not None
    try:
        (entry,) = await stream.read(1)
        await stream.dead_letter(lease.token, [(entry, "bad event: malformed JSON")])
    finally:
        await lease.release()
    assert await redis.xlen(KEYS.events(SESSION)) == 0
    ((_, fields),) = await redis.xrange(KEYS.dead)
    assert fields[b"entry_id"].decode() == bad
    assert fields[b"event"] == b"{broken"
    assert fields[b"reason"] == b"bad event: malformed JSON"
    assert fields[b"session"] == SESSION.encode()


async def test_a_held_lease_excludes_others_and_tokens_increase(redis: aioredis.Redis) -> None:
    first = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert first is not None
    assert await Lease.acquire(redis, KEYS, SESSION, 5_000) is None
    assert await Lease.acquire(redis, KEYS, "another-session", 5_000) is not None
    await first.release()
    second = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert second is not None
    assert second.token > first.token
    await second.release()


async def test_a_lease_is_renewed_while_held(redis: aioredis.Redis) -> None:
    lease = await Lease.acquire(redis, KEYS, SESSION, 300)
    assert lease is not None
    try:
        await asyncio.sleep(0.8)  # well past the TTL: only renewal keeps it
        assert await redis.get(KEYS.lease(SESSION)) == str(lease.token).encode()
        lease.check()
    finally:
        await lease.release()
    assert not await redis.exists(KEYS.lease(SESSION))


async def test_a_stale_holder_is_refused_everywhere(
    redis: aioredis.Redis, stream: SessionStream, store: SqliteStore
) -> None:
    ids = await _add(redis, b"1")
    stale = await Lease.acquire(redis, KEYS, SESSION, 300)
    assert stale is not None
    await stream.read(1)
    # The stale holder stalls (GC pause, network partition); its lease expires and moves on.
    await redis.delete(KEYS.lease(SESSION))
    fresh = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert fresh is not None
    assert fresh.token > stale.token
    try:
        await store.write_batch(BatchWrite(memory_session_id=SESSION, project="p",
                                           fence=fresh.token, event_ids=["e0"]))  # fmt: skip
        with pytest.raises(LeaseLostError):
            await store.write_batch(BatchWrite(
                memory_session_id=SESSION, project="p", fence=stale.token, event_ids=["e1"],
                observations=[_observation("written by the stale holder")],
            ))  # fmt: skip
        assert await store.observations(memory_session_id=SESSION) == []
        (entry,) = await SessionStream(redis, KEYS, SESSION, "consumer-a").read(1)
        with pytest.raises(LeaseLostError):
            await stream.ack(stale.token, ids)
        with pytest.raises(LeaseLostError):
            await stream.dead_letter(stale.token, [(entry, "nope")])
        assert not await stream.delete_if_drained(stale.token)
        states = StateStore(redis, KEYS)
        pipe = redis.pipeline(transaction=False)
        states.queue_save(pipe, SESSION, stale.token, ObserverState(system="old"))
        assert await pipe.execute() == [-1]
        assert await states.load(SESSION) is None
        assert await redis.xlen(KEYS.events(SESSION)) == 1  # nothing acked by the stale one
        await asyncio.sleep(0.3)  # its renewal notices the loss
        with pytest.raises(LeaseLostError):
            stale.check()
    finally:
        await stale.release()
        await fresh.release()


async def test_releasing_a_lost_lease_leaves_the_new_holders_alone(redis: aioredis.Redis) -> None:
    stale = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert stale is not None
    await redis.delete(KEYS.lease(SESSION))
    fresh = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert fresh is not None
    await stale.release()
    assert await redis.get(KEYS.lease(SESSION)) == str(fresh.token).encode()
    await fresh.release()


async def test_delete_if_drained_only_deletes_an_empty_stream(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    ids = await _add(redis, b"1")
    await redis.sadd(KEYS.sessions, SESSION)
    lease = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert lease is not None
    try:
        assert not await stream.delete_if_drained(lease.token)
        await stream.read(1)
        await stream.ack(lease.token, ids)
        assert await stream.delete_if_drained(lease.token)
    finally:
        await lease.release()
    assert not await redis.exists(KEYS.events(SESSION))
    assert not await redis.sismember(KEYS.sessions, SESSION)


async def test_a_lost_fence_counter_recovers_instead_of_refusing_forever(
    redis: aioredis.Redis, store: SqliteStore
) -> None:
    def batch(fence: int) -> BatchWrite:
        return BatchWrite(memory_session_id=SESSION, project="p", fence=fence, event_ids=[])

    await redis.set(KEYS.fence(SESSION), 6)
    first = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert first is not None
    await store.write_batch(batch(first.token))
    await first.release()
    await redis.delete(KEYS.fence(SESSION))  # Redis restarted without persistence
    lost = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert lost is not None
    with pytest.raises(LeaseLostError) as info:
        await store.write_batch(batch(lost.token))
    await lost.release()
    assert info.value.stored_fence == first.token
    await raise_fence_floor(redis, KEYS, SESSION, info.value.stored_fence)
    again = await Lease.acquire(redis, KEYS, SESSION, 5_000)
    assert again is not None
    assert again.token > first.token
    await store.write_batch(batch(again.token))
    await again.release()


async def test_a_read_ahead_is_handed_out_by_the_next_new_only_read(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    ids = await _add(redis, b"1", b"2", b"3")
    pipe = redis.pipeline(transaction=False)
    stream.queue_read_ahead(pipe, 2)
    stream.keep_ahead((await pipe.execute())[-1])
    later = await _add(redis, b"4")
    # What the commit read, not what is newest: nothing is skipped or read twice.
    assert [e.id for e in await stream.read(1, claim=False)] == ids[:1]
    assert [e.id for e in await stream.read(5, claim=False)] == ids[1:2]
    assert [e.id for e in await stream.read(5, claim=False)] == ids[2:] + later


async def test_a_claiming_read_drops_the_read_ahead_and_takes_it_over(
    redis: aioredis.Redis, stream: SessionStream
) -> None:
    ids = await _add(redis, b"1", b"2")
    pipe = redis.pipeline(transaction=False)
    stream.queue_read_ahead(pipe, 8)
    stream.keep_ahead((await pipe.execute())[-1])
    got = await stream.read(8)
    assert [(e.id, e.claimed) for e in got] == [(ids[0], True), (ids[1], True)]
    assert await stream.read(8, claim=False) == []
