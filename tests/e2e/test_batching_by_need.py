"""A live session's turn runs when it is due: a full batch, a request boundary, or a long wait.

Times are compressed by the settings (DESIGN: every waiting decision comes from
MEMQ_BATCH_MAX_EVENTS, MEMQ_BATCH_MAX_WAIT_S and MEMQ_BATCH_WAIT_MS).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from arq.connections import ArqRedis

from pipeline.prompting.prompts import RECORDED_ELEMENT, SESSION_ELEMENT
from tests.support.fake_observer import FakeObserver
from tests.support.worker_checks import observations
from tests.support.worker_harness import (
    drain,
    make_settings,
    prompt,
    publish,
    running_runtime,
    summarize,
    tool_call,
)


def _calls_in(user: str) -> int:
    return user.count(f"<{SESSION_ELEMENT}>")


async def test_a_few_tool_calls_wait_their_longest_wait_then_share_one_turn(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, batch_max_wait_s="1.5")
    published = time.time()
    await publish(arq_redis, settings, tool_call("s1", 0), tool_call("s1", 1))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    (request,) = fake_observer.requests
    assert _calls_in(request.user) == 2
    assert request.received_at - published >= 1.4
    assert len(await observations(settings, "s1")) == 2


async def test_a_full_batch_or_a_request_boundary_is_observed_at_once(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url,
                             batch_max_wait_s="30", batch_max_events="3")  # fmt: skip
    started = time.monotonic()
    await publish(arq_redis, settings, *[tool_call("full", n) for n in range(3)])
    await publish(arq_redis, settings, tool_call("closed", 0), summarize("closed"))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    assert time.monotonic() - started < 15  # neither waited out the 30 s
    full = [r for r in fake_observer.requests if ">full</memory_session_id>" in r.system]
    assert [_calls_in(r.user) for r in full] == [3]
    closed = [r for r in fake_observer.requests if ">closed</memory_session_id>" in r.system]
    assert [_calls_in(r.user) for r in closed] == [1, 0]  # the call, then the summary


async def test_a_prompt_published_while_calls_wait_brings_their_turn_forward(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, batch_max_wait_s="30")
    await publish(arq_redis, settings, prompt("s1", 1, "fix the login test"), tool_call("s1", 0))
    async with running_runtime(settings, arq_redis) as rt:
        worker = asyncio.create_task(drain(rt, arq_redis, timeout_s=20))
        try:
            await asyncio.sleep(1.0)
            assert fake_observer.requests == []  # one call: it waits for more
            woken = time.time()
            await publish(arq_redis, settings, prompt("s1", 2, "now the signup test"))
        finally:
            await worker
    first, *_ = fake_observer.requests
    assert _calls_in(first.user) == 1
    assert first.received_at - woken < 5  # brought forward by the prompt, not after 30 s


async def test_each_turn_sees_what_the_session_recorded_before_it(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, batch_max_events="1")
    await publish(arq_redis, settings, tool_call("s1", 0), tool_call("s1", 1))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    first, second = fake_observer.requests
    assert f"<{RECORDED_ELEMENT}>" not in first.user
    (stored_first, _) = sorted(await observations(settings, "s1"), key=lambda r: r.id)
    assert f"<{RECORDED_ELEMENT}>" in second.user
    assert f"discovery: {stored_first.title}" in second.user
    assert second.messages[:-1] == []  # no earlier exchange is re-sent (history is off)
