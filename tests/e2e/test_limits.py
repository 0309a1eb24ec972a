"""Fleet limits end to end: budgets (`paused:budget`), rate limits (`throttled`), retry-after."""

from __future__ import annotations

import itertools
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from arq.connections import ArqRedis

from pipeline.outcomes import JobResult
from tests.support.fake_observer import FakeObserver, RecordedRequest, Reply, deterministic_reply
from tests.support.worker_checks import observations, outcomes, unacked
from tests.support.worker_harness import (
    drain,
    make_settings,
    publish,
    running_runtime,
    tool_call,
)
from worker.keys import Keys
from worker.limits.budget import Budget, seconds_to_midnight
from worker.limits.rate_limit import RateLimiter
from worker.sessions.runtime import Runtime
from worker.sessions.session_run import observe
from worker.telemetry.counters import Counters

ONE_CALL_A_TURN = {"batch_max_events": "1"}
QUOTA_PROSE = (Path(__file__).parent.parent / "data" / "replies" / "quota_prose.txt").read_text()


async def _deferred_s(rt: Runtime, session: str, job: int) -> float:
    """How far in the future the session's next job was scheduled."""
    score = await rt.redis.zscore(rt.keys.queue, rt.keys.job_id(session, job))
    assert score is not None, "the job was not deferred"
    return float(score) / 1000 - time.time()


async def _tokens_used(rt: Runtime) -> int:
    tokens = await Counters(rt.redis, rt.keys).tokens()
    return tokens["input"] + tokens["output"]


async def test_a_spent_daily_budget_pauses_the_session_and_a_raised_one_loses_nothing(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    spent = {**ONE_CALL_A_TURN, "budget_tokens_per_day": "1", "budget_recheck_s": "0.3"}
    settings = make_settings(tmp_path, redis_url, fake_observer.url, **spent)
    await publish(arq_redis, settings, *[tool_call("b1", n) for n in range(3)])
    async with running_runtime(settings, arq_redis) as rt:
        # The first call is allowed (nothing used yet); its reported tokens spend the budget.
        assert await observe(rt, "b1", rt.keys.job_id("b1", 1)) is JobResult.PAUSED
        assert await _deferred_s(rt, "b1", 2) <= 0.3
        # Looking again with the budget unchanged makes no call.
        assert await observe(rt, "b1", rt.keys.job_id("b1", 2)) is JobResult.PAUSED
        used = await _tokens_used(rt)
        state = await Budget(rt.redis, rt.keys, per_day=1, per_project=0, recheck_s=1).state()
        # The runs above were called directly: only the last deferral stays queued.
        await rt.redis.zrem(rt.keys.queue, rt.keys.job_id("b1", 1), rt.keys.job_id("b1", 2))
    assert len(fake_observer.requests) == 1
    assert state.used == used > 1
    assert state.projects == {"demo": used}
    assert len(await observations(settings, "b1")) == 1
    assert await unacked(arq_redis, settings, "b1") == (2, 1)
    counts = await outcomes(arq_redis, settings)
    assert (counts["paused:budget"], counts["paused"], counts["retry"], counts["dead"]) == (
        2,
        2,
        0,
        0,
    )
    budget_lines = [r for r in caplog.records if "token budget reached" in r.getMessage()]
    assert len(budget_lines) == 2  # one line per refused turn
    assert all(r.levelno == logging.WARNING and "\n" not in r.getMessage() for r in budget_lines)
    # The operator raises the budget and restarts the worker: the deferred job stores the rest.
    raised = make_settings(
        tmp_path, redis_url, fake_observer.url, **ONE_CALL_A_TURN, budget_tokens_per_day="10000000"
    )
    async with running_runtime(raised, arq_redis) as rt:
        await drain(rt, arq_redis)
    assert len(await observations(settings, "b1")) == 3
    assert await unacked(arq_redis, settings, "b1") == (0, 0)


async def test_a_paused_budget_waits_at_most_the_recheck_interval_or_until_midnight(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, **ONE_CALL_A_TURN, budget_tokens_per_day="1"
    )
    await publish(arq_redis, settings, tool_call("b1", 1), tool_call("b1", 2))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "b1", rt.keys.job_id("b1", 1)) is JobResult.PAUSED
        expected = min(60.0, seconds_to_midnight(datetime.now(UTC)))
        assert expected - 2 <= await _deferred_s(rt, "b1", 2) <= expected


PROJECT_BUDGETS = [
    pytest.param({"budget_tokens_per_day": "1"}, {"a1": 1, "b1": 0}, id="one-budget-for-all"),
    pytest.param(
        {"budget_tokens_per_day_per_project": "1"}, {"a1": 1, "b1": 1}, id="a-budget-each"
    ),
]


@pytest.mark.parametrize(("budget", "calls"), PROJECT_BUDGETS)
async def test_the_per_project_budget_keeps_one_project_from_spending_anothers(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    budget: dict[str, str],
    calls: dict[str, int],
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, **ONE_CALL_A_TURN, **budget)
    await publish(arq_redis, settings, *[tool_call("a1", n, project="alpha") for n in range(2)])
    await publish(arq_redis, settings, *[tool_call("b1", n, project="beta") for n in range(2)])
    async with running_runtime(settings, arq_redis) as rt:
        for session in ("a1", "b1"):
            assert await observe(rt, session, rt.keys.job_id(session, 1)) is JobResult.PAUSED
    asked = {s: sum(f"<memory_session_id>{s}<" in r.system for r in fake_observer.requests)
             for s in ("a1", "b1")}  # fmt: skip
    assert asked == calls
    for session, n in calls.items():
        assert len(await observations(settings, session)) == n
    assert (await outcomes(arq_redis, settings))["paused:budget"] == 2


async def test_over_the_rate_limit_a_turn_is_throttled_and_not_a_failed_attempt(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, **ONE_CALL_A_TURN, rate_limit_rpm="2"
    )
    await publish(arq_redis, settings, *[tool_call("r1", n) for n in range(4)])
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "r1", rt.keys.job_id("r1", 1)) is JobResult.THROTTLED
        # Two calls a minute: the third waits ~30 s, with up to 25 % jitter.
        assert 28 <= await _deferred_s(rt, "r1", 2) <= 37.6
        assert len(fake_observer.requests) == 2
        assert not await rt.redis.exists(rt.keys.attempts("r1"))
        assert await unacked(arq_redis, settings, "r1") == (2, 1)
        counts = await outcomes(arq_redis, settings)
        assert (counts["throttled"], counts["retry"], counts["stored"]) == (1, 0, 2)
        # A minute later the bucket is full again and the throttled turn goes through.
        await rt.redis.delete(rt.keys.rate_limit("anthropic", "test-model"))
        assert await observe(rt, "r1", rt.keys.job_id("r1", 2)) is JobResult.DRAINED
    assert len(await observations(settings, "r1")) == 4
    assert await unacked(arq_redis, settings, "r1") == (0, 0)


async def test_a_short_rate_limit_wait_is_slept_inside_the_turn(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, **ONE_CALL_A_TURN, rate_limit_rpm="120"
    )
    # Another worker already spent this minute's requests: each call now waits ~0.5 s.
    other = RateLimiter(arq_redis, Keys(settings.prefix), "anthropic", "test-model", rpm=120, tpm=0)
    for _ in range(120):
        await other.acquire()
    await publish(arq_redis, settings, *[tool_call("w1", n) for n in range(3)])
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "w1", rt.keys.job_id("w1", 1)) is JobResult.DRAINED
    times = [r.received_at for r in fake_observer.requests]
    assert len(times) == 3
    assert all(later - earlier >= 0.4 for earlier, later in itertools.pairwise(times))
    counts = await outcomes(arq_redis, settings)
    assert (counts["throttled"], counts["stored"]) == (0, 3)


async def test_tokens_per_minute_are_charged_with_the_usage_the_api_reported(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    def costly(request: RecordedRequest) -> Reply:
        return msgspec.structs.replace(
            deterministic_reply(request), input_tokens=1500, output_tokens=300
        )

    fake_observer.responder = costly
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, **ONE_CALL_A_TURN, rate_limit_tpm="600"
    )
    await publish(arq_redis, settings, tool_call("t1", 1), tool_call("t1", 2))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "t1", rt.keys.job_id("t1", 1)) is JobResult.THROTTLED
        # 1800 tokens against 600 a minute: 1201 must refill before the next call.
        owed_s = (1800 - 600 + 1) * 60 / 600
        assert owed_s - 2 <= await _deferred_s(rt, "t1", 2) <= owed_s * 1.25
        assert await _tokens_used(rt) == 1800
    assert len(fake_observer.requests) == 1


@pytest.mark.parametrize(("retry_after", "slept"), [("0.7", True), ("5", False)])
async def test_a_retry_after_holds_every_session_not_only_the_one_that_got_it(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    retry_after: str,
    slept: bool,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    fake_observer.script(
        Reply(status=429, headers={"retry-after": retry_after}, error_type="rate_limit_error")
    )
    await publish(arq_redis, settings, tool_call("x1", 1), tool_call("y1", 1))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "x1", rt.keys.job_id("x1", 1)) is JobResult.RETRY
        result = await observe(rt, "y1", rt.keys.job_id("y1", 1))
        counts = await outcomes(arq_redis, settings)
        if slept:
            assert result is JobResult.DRAINED
            first, second = fake_observer.requests
            assert second.received_at - first.received_at >= 0.6
            assert counts["throttled"] == 0
        else:
            assert result is JobResult.THROTTLED
            assert len(fake_observer.requests) == 1
            assert 4 <= await _deferred_s(rt, "y1", 2) <= 5 * 1.25
            assert counts["throttled"] == 1
        assert counts["retry"] == 1  # only the 429 itself was a failed attempt


async def test_tokens_of_a_reply_that_stores_nothing_still_count_against_the_budget(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    # Quota prose pauses the provider and commits nothing: its tokens were still spent.
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, **ONE_CALL_A_TURN, budget_tokens_per_day="1000000"
    )
    await publish(arq_redis, settings, tool_call("q1", 0))
    fake_observer.script(Reply(text=QUOTA_PROSE, input_tokens=700, output_tokens=40))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "q1", rt.keys.job_id("q1", 1)) is JobResult.PAUSED
        state = await Budget(rt.redis, rt.keys, per_day=1, per_project=0, recheck_s=1).state()
        await rt.redis.delete(rt.keys.pause("anthropic"))
        await rt.redis.zrem(rt.keys.queue, rt.keys.job_id("q1", 1))
    assert state.used == 740
    assert state.projects == {"demo": 740}
    assert await unacked(arq_redis, settings, "q1") == (1, 1)
