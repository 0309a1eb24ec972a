"""The one-job-per-session protocol against a real redis-server."""

from __future__ import annotations

import redis.asyncio as aioredis

from worker.keys import Keys
from worker.queue.arq_job_format import ARQ_JOB_KEY_PREFIX as job_key_prefix
from worker.queue.scheduling import Scheduler, job_deserializer

KEYS = Keys("t1")


async def _publish(s: Scheduler, session: str, event_id: str, max_pending: int = 100) -> int:
    status, _ = await s.publish(
        session, event_id, b'{"x":1}', dedupe_ttl_s=60, max_pending=max_pending
    )
    return status


async def test_first_publish_schedules_one_job_and_later_ones_do_not(
    redis: aioredis.Redis,
) -> None:
    s = Scheduler(redis, KEYS)
    assert [await _publish(s, "s1", f"e{i}") for i in range(3)] == [1, 1, 1]
    jobs = await redis.zrange(KEYS.queue, 0, -1)
    assert jobs == [b"t1:observe:s1:1"]
    payload = job_deserializer(await redis.get(job_key_prefix + "t1:observe:s1:1"))
    assert payload["f"] == "observe_session"
    assert payload["a"] == ["s1"]
    assert await redis.xlen(KEYS.events("s1")) == 3
    assert await redis.smembers(KEYS.sessions) == {b"s1"}


async def test_same_event_id_is_stored_once(redis: aioredis.Redis) -> None:
    s = Scheduler(redis, KEYS)
    first = await s.publish("s1", "e1", b"{}", dedupe_ttl_s=60, max_pending=10)
    second = await s.publish("s1", "e1", b"{}", dedupe_ttl_s=60, max_pending=10)
    assert first[0] == 1
    assert second == (0, first[1])
    assert await redis.xlen(KEYS.events("s1")) == 1


async def test_publish_is_refused_over_max_pending(redis: aioredis.Redis) -> None:
    s = Scheduler(redis, KEYS)
    assert [await _publish(s, "s1", f"e{i}", max_pending=2) for i in range(3)] == [1, 1, -1]
    assert await redis.xlen(KEYS.events("s1")) == 2


async def test_release_hands_off_when_entries_remain_else_clears(redis: aioredis.Redis) -> None:
    s = Scheduler(redis, KEYS)
    await _publish(s, "s1", "e1")
    assert await s.release("s1", "t1:observe:s1:1") == "t1:observe:s1:2"
    assert await redis.get(KEYS.scheduled("s1")) == b"t1:observe:s1:2"
    await redis.delete(KEYS.events("s1"))
    assert await s.release("s1", "t1:observe:s1:2") is None
    assert await redis.get(KEYS.scheduled("s1")) is None
    # a stale job id never touches the marker
    await _publish(s, "s1", "e2")
    assert await s.release("s1", "t1:observe:s1:2") is None
    assert await redis.get(KEYS.scheduled("s1")) == b"t1:observe:s1:3"


async def test_sweep_reschedules_when_the_scheduled_job_is_gone(redis: aioredis.Redis) -> None:
    s = Scheduler(redis, KEYS)
    await _publish(s, "s1", "e1")
    assert await s.sweep("s1") is None  # the job exists
    await redis.delete(job_key_prefix + "t1:observe:s1:1")  # e.g. failed for good
    assert await s.sweep("s1") == "t1:observe:s1:2"
    await redis.delete(KEYS.events("s1"))
    assert await s.sweep("s1") is None  # nothing to do for an empty stream
