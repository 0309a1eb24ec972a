"""One job per session at a time: publish, hand-off, release and sweep as atomic Lua scripts.

A session has at most one arq job scheduled or running; its id is stored under
`Keys.scheduled(session)`. Publishing enqueues a job only when none is scheduled; a job
that finishes hands off to a fresh job id when entries remain, otherwise clears the marker.
Every step is one Lua script, so an event published while a job finishes cannot strand.
Job ids get a per-session sequence number because arq refuses to re-enqueue an id whose
job key still exists, and that key outlives the job function by a few milliseconds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

from worker.keys import Keys
from worker.queue.arq_job_format import (
    ARQ_EXPIRES_EXTRA_MS,
    ARQ_JOB_KEY_PREFIX,
    SCHEDULE_LUA,
    job_expiry_ms,
)
from worker.queue.arq_job_format import job_payload as arq_job_payload
from worker.redis_text import as_text

if TYPE_CHECKING:  # the hook path imports this module and cannot afford redis-py (0.1 s)
    from redis.asyncio import Redis
    from redis.asyncio.client import Pipeline

JOB_FUNCTION = "observe_session"


def job_serializer(data: dict[str, Any]) -> bytes:
    """arq job serializer (msgpack): also used by the producer, so both sides agree.

    A failed job's result is an exception (arq's `JobExecutionFailed('job expired')` for a
    job whose key a failover lost): it is stored as its one-line text, where msgpack alone
    failed and arq logged a traceback for it.
    """
    return msgspec.msgpack.encode(data, enc_hook=_as_text)


def _as_text(value: Any) -> str:
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    raise NotImplementedError(f"a job holds a {type(value).__name__}, which msgpack cannot hold")


def job_deserializer(raw: bytes) -> dict[str, Any]:
    """arq job deserializer matching job_serializer."""
    data: dict[str, Any] = msgspec.msgpack.decode(raw)
    return data


# KEYS: seen, stream, sessions, scheduled, jobseq, queue, waiting
# ARGV: event json, session, dedupe ttl s, max pending, job payload, score ms, expires ms,
#       job id prefix, arq job key prefix, due now (1/0), full at (entries; 0 = never)
# A job waiting for its turn to be due (MEMQ_BATCH_MAX_WAIT_S; marked in `waiting` by its
# hand-off) is brought forward when this event makes the turn due: a prompt, summary request
# or end, or a full batch. A job deferred for any other reason (a retry, a pause, a budget)
# is never marked, so a publish cannot hurry it.
PUBLISH_LUA = (
    "local ARGV_ARQ_PREFIX = ARGV[9]\n"
    + SCHEDULE_LUA
    + """
local existing = redis.call('GET', KEYS[1])
if existing then return {0, existing} end
if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[4]) then return {-1, ''} end
local id = redis.call('XADD', KEYS[2], '*', 'event', ARGV[1])
redis.call('SET', KEYS[1], id, 'EX', tonumber(ARGV[3]))
redis.call('SADD', KEYS[3], ARGV[2])
local scheduled = redis.call('GET', KEYS[4])
if not scheduled then
  schedule(KEYS[4], KEYS[5], KEYS[6], ARGV[8], ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]))
elseif redis.call('GET', KEYS[7]) == scheduled and (ARGV[10] == '1' or (
       tonumber(ARGV[11]) > 0 and redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[11]))) then
  redis.call('ZADD', KEYS[6], 'XX', 'LT', tonumber(ARGV[6]), scheduled)
  redis.call('DEL', KEYS[7])
end
return {1, id}
"""
)

# Called by the running job when it stops. If the marker still names this job, either hand
# off to a new job (entries remain: undelivered or pending) or clear the marker.
# A job that stops because its turn is not due yet passes the newest entry id it read: the
# new job is marked as waiting (a publish may bring it forward), unless entries arrived
# after that read, which may have made the turn due: then the session is looked at now.
# KEYS: scheduled, jobseq, queue, stream, waiting
# ARGV: my job id, job payload, score ms if entries remain, expires ms, job id prefix,
#       arq prefix, force (1 = hand off even when the stream is empty),
#       newest entry id read when waiting ('' otherwise), now ms
RELEASE_LUA = (
    "local ARGV_ARQ_PREFIX = ARGV[6]\n"
    + SCHEDULE_LUA
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, ''} end
redis.call('DEL', KEYS[5])
if redis.call('XLEN', KEYS[4]) > 0 or ARGV[7] == '1' then
  local score = tonumber(ARGV[3])
  local waiting = ARGV[8] ~= ''
  if waiting then
    local newest = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)[1]
    if newest and newest[1] ~= ARGV[8] then
      score = tonumber(ARGV[9])
      waiting = false
    end
  end
  local job = schedule(KEYS[1], KEYS[2], KEYS[3], ARGV[5], ARGV[2], score, tonumber(ARGV[4]))
  if waiting then redis.call('SET', KEYS[5], job, 'PX', tonumber(ARGV[4])) end
  return {1, job}
end
redis.call('DEL', KEYS[1])
return {2, ''}
"""
)

# Sweep one session: schedule a job when entries exist but no live job is scheduled.
# KEYS: scheduled, jobseq, queue, stream
# ARGV: job payload, score ms, expires ms, job id prefix, arq prefix
SWEEP_LUA = (
    "local ARGV_ARQ_PREFIX = ARGV[5]\n"
    + SCHEDULE_LUA
    + """
if redis.call('XLEN', KEYS[4]) == 0 then return {0, ''} end
local current = redis.call('GET', KEYS[1])
if current and redis.call('EXISTS', ARGV_ARQ_PREFIX .. current) == 1 then return {0, current} end
return {1, schedule(KEYS[1], KEYS[2], KEYS[3], ARGV[4], ARGV[1], tonumber(ARGV[2]),
                    tonumber(ARGV[3]))}
"""
)


def now_ms() -> int:
    """Wall-clock milliseconds, as arq scores its queue."""
    return int(time.time() * 1000)


def job_payload(session: str, enqueue_ms: int) -> bytes:
    """arq's serialized job for observe_session(session)."""
    return arq_job_payload(JOB_FUNCTION, [session], enqueue_ms, job_serializer)


def publish_args(
    keys: Keys,
    session: str,
    event_id: str,
    event_json: bytes,
    *,
    dedupe_ttl_s: int,
    max_pending: int,
    due_now: bool = False,
    full_at: int = 0,
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of PUBLISH_LUA: one event, scheduled now (the hook's producer uses it too).

    `due_now` (a prompt, summary request or end) and `full_at` (MEMQ_BATCH_MAX_EVENTS) bring
    a session's waiting job forward.
    """
    k = keys
    enqueue = now_ms()
    return [
        k.seen(event_id),
        k.events(session),
        k.sessions,
        k.scheduled(session),
        k.job_sequence(session),
        k.queue,
        k.waiting(session),
    ], [
        event_json,
        session,
        dedupe_ttl_s,
        max_pending,
        job_payload(session, enqueue),
        enqueue,
        ARQ_EXPIRES_EXTRA_MS,
        k.job_id_prefix(session),
        ARQ_JOB_KEY_PREFIX,
        1 if due_now else 0,
        full_at,
    ]


class Scheduler:
    """Runs the scheduling scripts for one tenant prefix."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._publish = redis.register_script(PUBLISH_LUA)
        self._release = redis.register_script(RELEASE_LUA)
        self._sweep = redis.register_script(SWEEP_LUA)

    def _job_args(self, session: str, defer_ms: int) -> tuple[bytes, int, int, str]:
        enqueue = now_ms()
        score = enqueue + max(0, defer_ms)
        expires = job_expiry_ms(score, enqueue)
        return job_payload(session, enqueue), score, expires, self.keys.job_id_prefix(session)

    async def publish(self, script_args: tuple[list[str], list[Any]]) -> tuple[int, str]:
        """Run the publish script with `publish_args`' KEYS and ARGV: XADD one event
        (deduplicated by id, refused over max_pending) and schedule its job.

        Returns (status, stream id): 1 added, 0 duplicate (id of the first copy), -1 refused.
        """
        keys, args = script_args
        status, stream_id = await self._publish(keys=keys, args=args)
        return int(status), as_text(stream_id)

    @property
    def publish_script(self) -> Any:
        """The registered publish script (callable with keys=, args=, client=)."""
        return self._publish

    async def release(
        self, session: str, job_id: str, *, defer_ms: int = 0, force: bool = False
    ) -> str | None:
        """Stop being the session's job: hand off to a new job id if entries remain.

        Returns the new job id, or None when the marker was cleared or was not ours.
        """
        keys, args = self._release_args(session, job_id, defer_ms, force, None)
        status, new_id = await self._release(keys=keys, args=args)
        return as_text(new_id) if int(status) == 1 else None

    def queue_release(
        self,
        pipe: Pipeline,
        session: str,
        job_id: str,
        *,
        defer_ms: int = 0,
        waiting_after: str | None = None,
    ) -> None:
        """`release` as part of a pipeline the caller runs. `waiting_after`: the job stops
        because its turn is not due; the newest entry id it read."""
        keys, args = self._release_args(session, job_id, defer_ms, False, waiting_after)
        # EVAL, not EVALSHA: a pipeline cannot recover from NOSCRIPT.
        pipe.eval(RELEASE_LUA, len(keys), *keys, *args)

    def _release_args(
        self, session: str, job_id: str, defer_ms: int, force: bool, waiting_after: str | None
    ) -> tuple[list[str], list[Any]]:
        k = self.keys
        payload, score, expires, prefix = self._job_args(session, defer_ms)
        keys = [k.scheduled(session), k.job_sequence(session), k.queue, k.events(session),
                k.waiting(session)]  # fmt: skip
        args = [job_id, payload, score, expires, prefix, ARQ_JOB_KEY_PREFIX,
                "1" if force else "0", waiting_after or "", now_ms()]  # fmt: skip
        return keys, args

    async def sweep(self, session: str) -> str | None:
        """Schedule a job for a session with entries but no live job; returns the new job id."""
        k = self.keys
        payload, score, expires, prefix = self._job_args(session, 0)
        status, new_id = await self._sweep(
            keys=[k.scheduled(session), k.job_sequence(session), k.queue, k.events(session)],
            args=[payload, score, expires, prefix, ARQ_JOB_KEY_PREFIX],
        )
        return as_text(new_id) if int(status) == 1 else None
