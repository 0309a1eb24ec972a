"""The CallGate against a real redis-server: budgets, rate limits, the refusal's outcome."""

from __future__ import annotations

import time

import pytest
import redis.asyncio as aioredis

from pipeline.outcomes import Outcome
from worker.keys import Keys
from worker.limits.admission import SHORT_WAIT_S, CallGate
from worker.limits.budget import BudgetExceededError
from worker.limits.pauses import Pauses, ProviderPausedError
from worker.limits.rate_limit import ThrottledError
from worker.observers.protocol import Usage
from worker.settings import load_settings
from worker.telemetry.counters import Counters

KEYS = Keys("gate")


def _gate(redis: aioredis.Redis, **env: str) -> CallGate:
    settings = load_settings({f"MEMQ_{k.upper()}": v for k, v in env.items()})
    counters = Counters(redis, KEYS)
    return CallGate(redis, KEYS, settings, provider="anthropic", model="m", counters=counters)


async def _spend(redis: aioredis.Redis, gate: CallGate, usage: Usage) -> None:
    pipe = redis.pipeline(transaction=False)
    gate.queue_budget(pipe, "alpha", usage)
    await pipe.execute()


def _far() -> float:
    return time.monotonic() + 60


async def test_a_spent_budget_refuses_the_next_call_as_paused_budget(
    redis: aioredis.Redis,
) -> None:
    gate = _gate(redis, budget_tokens_per_day_per_project="1000")
    await gate.admit("alpha", _far())
    await _spend(redis, gate, Usage(input_tokens=700, cached_input_tokens=500, output_tokens=200))
    await gate.admit("alpha", _far())  # 900 of 1000 (cached tokens are part of input): under
    await _spend(redis, gate, Usage(input_tokens=50, output_tokens=50))
    with pytest.raises(BudgetExceededError) as refused:
        await gate.admit("alpha", _far())
    await gate.admit("beta", _far())  # another project's budget is its own
    result = await gate.refused(refused.value)
    assert (result.outcome, result.category, result.stop) == (Outcome.PAUSED, "budget", True)
    assert result.defer_s == refused.value.retry_s
    outcomes = await gate.counters.outcomes()
    assert (outcomes["paused"], outcomes["paused:budget"]) == (1, 1)


async def test_a_provider_paused_by_another_worker_is_waited_out_uncounted(
    redis: aioredis.Redis,
) -> None:
    gate = _gate(redis)
    await Pauses(redis, KEYS).pause("anthropic", 30, "quota")
    with pytest.raises(ProviderPausedError) as refused:
        await gate.admit("alpha", _far())
    result = await gate.refused(refused.value)
    assert (result.outcome, result.category, result.stop) == (Outcome.PAUSED, None, True)
    assert 25 < result.defer_s <= 30
    assert (await gate.counters.outcomes())["paused"] == 0  # the pausing worker counted it


async def test_a_long_rate_limit_wait_refuses_the_call_as_throttled(
    redis: aioredis.Redis,
) -> None:
    gate = _gate(redis, rate_limit_rpm="1")
    await gate.admit("alpha", _far())
    with pytest.raises(ThrottledError) as refused:
        await gate.admit("alpha", _far())
    assert refused.value.wait_s >= SHORT_WAIT_S
    result = await gate.refused(refused.value)
    assert (result.outcome, result.stop) == (Outcome.THROTTLED, True)
    # Jittered up to a quarter more, never less than the wait.
    assert refused.value.wait_s <= result.defer_s <= refused.value.wait_s * 1.25
    outcomes = await gate.counters.outcomes()
    assert (outcomes["throttled"], outcomes["paused"]) == (1, 0)


async def test_a_short_wait_is_slept_in_the_turn_unless_the_deadline_is_nearer(
    redis: aioredis.Redis,
) -> None:
    gate = _gate(redis)
    await gate.pause_shortly(0.3, "a provider's retry-after")
    with pytest.raises(ThrottledError):
        await gate.admit("alpha", time.monotonic() + 0.1)
    started = time.monotonic()
    await gate.admit("alpha", _far())
    assert time.monotonic() - started >= 0.1
    outcomes = await gate.counters.outcomes()
    assert outcomes["throttled"] == 0  # counted only when a refusal is settled
