"""arq's private job format (key, payload, expiry, queue score), written by memq's Lua scripts.

memq enqueues a session's arq job in the same script as the XADD or hand-off that needs it:
`ArqRedis.enqueue_job` after the script would leave a moment when the session's marker names
a job that does not exist yet, and a sweep then scheduled a second job for the same session.
The hook path cannot afford importing arq (0.2 s), so arq's constants are restated here;
tests/worker/queue/test_arq_job_format.py fails when the installed arq writes jobs differently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ARQ_JOB_KEY_PREFIX = "arq:job:"  # arq.constants.job_key_prefix
ARQ_EXPIRES_EXTRA_MS = 86_400_000  # arq.constants.expires_extra_ms

# schedule(...): a fresh job id from the session's sequence, named by the session's marker,
# stored and queued as arq.connections.ArqRedis.enqueue_job stores and queues it. Scripts using
# it define ARGV_ARQ_PREFIX (ARQ_JOB_KEY_PREFIX, passed in as an argument).
SCHEDULE_LUA = """
local function schedule(sched_key, seq_key, queue, job_prefix, payload, score, expires_ms)
  local seq = redis.call('INCR', seq_key)
  local job_id = job_prefix .. seq
  redis.call('SET', sched_key, job_id)
  redis.call('PSETEX', ARGV_ARQ_PREFIX .. job_id, expires_ms, payload)
  redis.call('ZADD', queue, score, job_id)
  return job_id
end
"""


def job_payload(
    function: str, args: list[Any], enqueue_ms: int, serializer: Callable[[dict[str, Any]], bytes]
) -> bytes:
    """arq's serialized job `function(*args)`, as arq.jobs.serialize_job makes it."""
    return serializer({"t": None, "f": function, "a": args, "k": {}, "et": enqueue_ms})


def job_expiry_ms(score_ms: int, enqueue_ms: int) -> int:
    """The job key's time to live, as enqueue_job sets it: until the score, plus a day."""
    return score_ms - enqueue_ms + ARQ_EXPIRES_EXTRA_MS
