"""A failed job's result is stored as text: a queued job whose key a Redis failover lost (the
new primary had the queue entry, not the job) fails in arq's one line, with no traceback,
and the session's entries are still stored once after the sweep."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from arq.connections import ArqRedis
from arq.constants import result_key_prefix
from arq.jobs import serialize_result
from arq.worker import FailedJobs, JobExecutionFailed

from tests.support.fake_observer import FakeObserver
from tests.support.worker_harness import (
    drain,
    make_settings,
    publish,
    running_runtime,
    sqlite_store,
    tool_call,
)
from worker.keys import Keys
from worker.queue.arq_job_format import ARQ_JOB_KEY_PREFIX
from worker.queue.scheduling import job_deserializer, job_serializer
from worker.sessions.jobs import sweep_sessions


def test_an_exception_result_is_stored_as_its_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="arq.jobs"):
        raw = serialize_result(
            "observe_session", ("s1",), {}, 1, 0, False, JobExecutionFailed("job expired"),
            0, 1, "t1:observe:s1:1:observe_session", "arq:queue", "t1:observe:s1:1",
            serializer=job_serializer,
        )  # fmt: skip
    assert caplog.records == []  # arq said "error serializing result" with a traceback
    assert raw is not None
    assert job_deserializer(raw)["r"] == "JobExecutionFailed: job expired"


async def test_a_queued_job_without_its_key_fails_in_one_line_and_loses_nothing(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    keys = Keys(settings.prefix)
    call = tool_call("keyless", 0)
    await publish(arq_redis, settings, call)
    job_id = (await arq_redis.get(keys.scheduled("keyless"))).decode()
    await arq_redis.delete(ARQ_JOB_KEY_PREFIX + job_id)  # the promoted replica never had it
    async with running_runtime(settings, arq_redis) as rt:
        with caplog.at_level(logging.WARNING), pytest.raises(FailedJobs, match="job expired"):
            await drain(rt, arq_redis, timeout_s=20)  # arq counts the job failed
        assert [r.getMessage() for r in caplog.records if r.exc_info] == []
        assert any(r.getMessage() == f"job {job_id} expired" for r in caplog.records)
        result = job_deserializer(await arq_redis.get(result_key_prefix + job_id))
        assert (result["s"], result["r"]) == (False, "JobExecutionFailed: job expired")
        # The session's marker names a job that is gone: the sweep schedules a new one.
        assert await sweep_sessions({"runtime": rt}) == 1
        await drain(rt, arq_redis, timeout_s=20)
    store = sqlite_store(settings)
    try:
        rows = await store.observations(memory_session_id="keyless")
    finally:
        await store.aclose()
    assert len(rows) == 1
    assert len(fake_observer.requests) == 1
