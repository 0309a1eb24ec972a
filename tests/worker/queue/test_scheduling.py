"""The one-job-per-session protocol against a real redis-server."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from worker.keys import Keys
from worker.queue.arq_job_format import ARQ_JOB_KEY_PREFIX as job_key_prefix
from worker.queue.scheduling import Scheduler, job_deserializer, publish_args

KEYS = Keys("t1")


async def _publish(
    s: Scheduler, session: str, event_id: str, max_pending: int = 100, **wake: bool | int
) -> int:
    args = publish_args(KEYS, session, event_id, b'{"x":1}', dedupe_ttl_s=60,
                        max_pending=max_pending, **wake)  # type: ignore[arg-type]  # fmt: skip
    status, _ = await s.publish(args)
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
    args = publish_args(KEYS, "s1", "e1", b"{}", dedupe_ttl_s=60, max_pending=10)
    first = await s.publish(args)
    second = await s.publish(args)
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


async def _job_score(redis: aioredis.Redis, session: str) -> float:
    job = await redis.get(KEYS.scheduled(session))
    score = await redis.zscore(KEYS.queue, job)
    assert score is not None
    return float(score)


async def _hand_off(
    redis: aioredis.Redis, s: Scheduler, session: str, waiting_after: str | None
) -> None:
    """End the session's job as a worker does: deferred an hour, waiting for its turn or not."""
    job = (await redis.get(KEYS.scheduled(session))).decode()
    pipe = redis.pipeline(transaction=False)
    s.queue_release(pipe, session, job, defer_ms=3_600_000, waiting_after=waiting_after)
    await pipe.execute()


async def _newest(redis: aioredis.Redis, session: str) -> str:
    ((entry_id, _),) = await redis.xrevrange(KEYS.events(session), count=1)
    return str(entry_id.decode())


async def test_a_waiting_job_is_brought_forward_by_a_boundary_or_a_full_batch(
    redis: aioredis.Redis,
) -> None:
    s = Scheduler(redis, KEYS)
    await _publish(s, "s1", "e1")
    await _hand_off(redis, s, "s1", await _newest(redis, "s1"))
    later = await _job_score(redis, "s1")
    await _publish(s, "s1", "e2", full_at=4)  # a tool call, the batch not full: it waits
    assert await _job_score(redis, "s1") == later
    await _publish(s, "s1", "e3", due_now=True)  # a prompt, summary request or end
    assert await _job_score(redis, "s1") < later
    await _hand_off(redis, s, "s1", await _newest(redis, "s1"))
    later, job = await _job_score(redis, "s1"), await redis.get(KEYS.scheduled("s1"))
    await _publish(s, "s1", "e4", full_at=4)  # the fourth waiting entry fills the batch
    assert await _job_score(redis, "s1") < later
    assert await redis.get(KEYS.scheduled("s1")) == job  # brought forward, not a second job


async def test_a_job_deferred_for_a_retry_or_a_pause_is_never_hurried_by_publishes(
    redis: aioredis.Redis,
) -> None:
    s = Scheduler(redis, KEYS)
    await _publish(s, "s1", "e1")
    await _hand_off(redis, s, "s1", None)  # a retry's backoff, a pause, a budget
    later = await _job_score(redis, "s1")
    for n in range(2, 12):
        await _publish(s, "s1", f"e{n}", due_now=True, full_at=4)
    assert await _job_score(redis, "s1") == later


async def test_entries_published_while_a_job_decided_to_wait_are_looked_at_at_once(
    redis: aioredis.Redis,
) -> None:
    s = Scheduler(redis, KEYS)
    await _publish(s, "s1", "e1")
    read = await _newest(redis, "s1")
    await _publish(s, "s1", "e2", due_now=True)  # lands between the job's read and release
    await _hand_off(redis, s, "s1", read)
    assert await _job_score(redis, "s1") < time.time() * 1000 + 60_000
    assert await redis.get(KEYS.waiting("s1")) is None
