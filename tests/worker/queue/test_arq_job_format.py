"""The arq job memq's Lua writes is the job arq's own enqueue_job writes: fails when arq changes."""

from __future__ import annotations

from arq import constants
from arq.connections import ArqRedis
from arq.jobs import Job, JobStatus, serialize_job

from worker.keys import Keys
from worker.queue.arq_job_format import ARQ_EXPIRES_EXTRA_MS, ARQ_JOB_KEY_PREFIX
from worker.queue.scheduling import (
    JOB_FUNCTION,
    Scheduler,
    job_deserializer,
    job_payload,
    job_serializer,
    publish_args,
)

KEYS = Keys("t1")


def test_the_restated_constants_and_payload_are_arqs() -> None:
    expected = serialize_job(JOB_FUNCTION, ("s1",), {}, None, 1234, serializer=job_serializer)
    assert job_payload("s1", 1234) == expected
    assert constants.job_key_prefix == ARQ_JOB_KEY_PREFIX
    assert constants.expires_extra_ms == ARQ_EXPIRES_EXTRA_MS


async def test_a_job_the_publish_script_wrote_is_one_arq_reads_as_its_own(
    arq_redis: ArqRedis,
) -> None:
    status, _ = await Scheduler(arq_redis, KEYS).publish(
        publish_args(KEYS, "s1", "e1", b"{}", dedupe_ttl_s=60, max_pending=10)
    )
    assert status == 1
    ours = Job("t1:observe:s1:1", arq_redis, _queue_name=KEYS.queue, _deserializer=job_deserializer)
    assert await ours.status() == JobStatus.queued
    info = await ours.info()
    assert info is not None
    assert (info.function, list(info.args), info.kwargs) == (JOB_FUNCTION, ["s1"], {})
    # arq refuses to enqueue an id it finds under its own job key.
    refused = await arq_redis.enqueue_job(
        JOB_FUNCTION, "s1", _job_id="t1:observe:s1:1", _queue_name=KEYS.queue
    )
    assert refused is None

    theirs = await arq_redis.enqueue_job(
        JOB_FUNCTION, "s2", _job_id="arq-own", _queue_name=KEYS.queue
    )
    assert theirs is not None
    ours_key, theirs_key = ARQ_JOB_KEY_PREFIX + ours.job_id, ARQ_JOB_KEY_PREFIX + "arq-own"
    assert await arq_redis.type(ours_key) == await arq_redis.type(theirs_key) == b"string"
    # The same time to live (a day past the score) and the same queue score (enqueue time).
    assert abs(await arq_redis.pttl(ours_key) - await arq_redis.pttl(theirs_key)) < 5_000
    ours_job = job_deserializer(await arq_redis.get(ours_key))
    theirs_job = job_deserializer(await arq_redis.get(theirs_key))
    assert ours_job.keys() == theirs_job.keys()
    assert {k: v for k, v in ours_job.items() if k not in ("a", "et")} == {
        k: v for k, v in theirs_job.items() if k not in ("a", "et")
    }
    scores = dict(await arq_redis.zrange(KEYS.queue, 0, -1, withscores=True))
    assert abs(scores[b"t1:observe:s1:1"] - scores[b"arq-own"]) < 5_000
    assert scores[b"t1:observe:s1:1"] == info.score
