"""The benches' own measurements: Redis cost deltas, the keyed observer delay, CPU ratios."""

from __future__ import annotations

import statistics
import time

import pytest
import redis.asyncio as aioredis

from bench.latency import keyed_observer, token_delay_s
from bench.redis_cost import redis_cost
from bench.throughput_report import Result, cpu_ratios
from tests.support.fake_observer import RecordedRequest


async def test_redis_cost_counts_commands_and_those_inside_scripts(redis: aioredis.Redis) -> None:
    before = await redis_cost(redis)
    for n in range(10):
        await redis.set(f"bench-test:{n}", n)
    script = "redis.call('set', KEYS[1], 1); redis.call('incr', KEYS[1]); return 1"
    await redis.eval(script, 1, "bench-test:script")  # type: ignore[misc]
    spent = await redis_cost(redis) - before
    assert spent.commands == 10 + 1 + 2  # INFO itself is left out


async def test_redis_cost_counts_the_servers_cpu(redis: aioredis.Redis) -> None:
    before = await redis_cost(redis)
    busy = "for i = 1, 300000 do redis.call('incr', KEYS[1]) end return 1"
    await redis.eval(busy, 1, "bench-test:busy")  # type: ignore[misc]
    spent = await redis_cost(redis) - before
    assert spent.commands == 300_000 + 1
    assert spent.cpu_s > 0.01  # 300,000 INCRs take Redis tens of milliseconds


def test_token_delays_spread_evenly_over_the_range() -> None:
    delays = [token_delay_s(t, 1.0, 2.0) for t in range(1, 2001)]
    assert 1.0 <= min(delays) < 1.01
    assert 1.99 < max(delays) <= 2.0
    assert abs(statistics.mean(delays) - 1.5) < 0.01


def test_keyed_observer_waits_the_delay_of_the_turns_last_call() -> None:
    answer = keyed_observer(1.0, 2.0)
    user = "recorded: Bash: L00000003 pytest\n<tool_call>L00000011 pytest</tool_call>\n"
    request = RecordedRequest(
        provider="anthropic", path="/v1/messages", headers={}, body={}, system="", user=user,
        messages=[], received_at=time.time(),
    )  # fmt: skip
    # 11 is the turn's last call (3 is only in its digest): 1 s + the golden-ratio step of 11,
    # worked out here rather than by the function under test.
    assert answer(request).delay_s == pytest.approx(1.0 + (11 * 0.6180339887498949) % 1.0)
    assert answer(request).delay_s == token_delay_s(11, 1.0, 2.0) != token_delay_s(3, 1.0, 2.0)


def test_cpu_ratios_pair_each_round_with_its_own_one_process_run() -> None:
    results = [
        Result(processes=1, batch=8, repeat=0, events=1000, worker_cpu_s=1.0, drain_s=2.0),
        Result(processes=2, batch=8, repeat=0, events=1000, worker_cpu_s=1.25, drain_s=2.0,
               idle_cpu_per_s=0.125),
        Result(processes=1, batch=8, repeat=1, events=1000, worker_cpu_s=2.0, drain_s=2.0),
        Result(processes=2, batch=8, repeat=1, events=1000, worker_cpu_s=2.0, drain_s=2.0),
    ]  # fmt: skip
    assert cpu_ratios(results, net=False) == {(2, 8): [0.8, 1.0]}
    assert cpu_ratios(results, net=True) == {(2, 8): [1.0, 1.0]}
