"""A provider error that echoes the request's API key: the key never leaves the process.

Through the real worker (`memq worker --burst`), real Redis and the fake observer echoing the
request's credentials: not in the worker's log, the dead letters (`memq dlq list`) or the
Redis pause key.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from pathlib import Path

import msgspec
import pytest
from arq.connections import ArqRedis

from pipeline.outcomes import JobResult
from tests.support.fake_observer import FakeObserver, Reply
from tests.support.ingest import REPO, console_script, subprocess_env
from tests.support.worker_checks import dead_letters, outcomes
from tests.support.worker_harness import make_settings, publish, running_runtime, tool_call
from worker.secret import Secret
from worker.sessions.session_run import observe

pytestmark = pytest.mark.slow

KEY = "sk-ant-api03-Zq8vR2mK7pL4wX9nB3cF6hJ1sD5gT0yE"


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)


async def test_an_echoed_key_is_masked_in_the_worker_log_and_the_dead_letters(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    fake_observer.responder = lambda _request: Reply(
        status=400, error_message="invalid request", echo_credentials=True
    )
    env = subprocess_env(
        tmp_path, redis_url, PYTHONPATH=str(REPO), MEMQ_CHROMA="off", MEMQ_OBSERVER="anthropic",
        ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=fake_observer.url, MEMQ_MAX_ATTEMPTS="1",
        MEMQ_LOG_FORMAT="json", MEMQ_BATCH_MAX_WAIT_S="0",  # a turn at once, not a batch's wait
    )  # fmt: skip
    await publish(arq_redis, settings, tool_call("k1", 1))
    worker = await asyncio.to_thread(_run, [console_script(), "worker", "--burst"], env)
    listed = await asyncio.to_thread(_run, [console_script(), "dlq", "list"], env)
    sent = fake_observer.requests[0].headers
    assert KEY in sent.get("x-api-key", "") + sent.get("authorization", "")  # what was echoed
    dead = await dead_letters(arq_redis, settings)
    assert len(dead) == 1
    assert "invalid request; request headers: " in str(dead[0])
    assert "***" in str(dead[0])
    assert "request headers: " in listed.stdout
    for text in (worker.stdout, worker.stderr, listed.stdout, listed.stderr, str(dead)):
        assert KEY not in text


async def test_an_echoed_key_is_masked_in_the_pause_key_and_the_log(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    settings = msgspec.structs.replace(settings, anthropic_api_key=Secret(KEY))
    fake_observer.script(Reply(status=401, error_message="bad key", echo_credentials=True))
    await publish(arq_redis, settings, tool_call("k2", 1))
    with caplog.at_level(logging.DEBUG):
        async with running_runtime(settings, arq_redis) as rt:
            assert await observe(rt, "k2", rt.keys.job_id("k2", 1)) is JobResult.PAUSED
            pause = await rt.redis.get(rt.keys.pause("anthropic"))
    assert pause is not None
    assert b"bad key; request headers: " in pause
    assert b"***" in pause
    assert KEY.encode() not in pause
    assert (await outcomes(arq_redis, settings))["paused"] == 1
    logged = "\n".join(r.getMessage() + str(vars(r)) for r in caplog.records)
    assert "request headers: " in logged
    assert KEY not in logged
