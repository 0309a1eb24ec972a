"""Fleet-wide rate limits against a real redis-server: buckets shared by every worker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from worker.keys import Keys
from worker.limits.pauses import Pauses, ProviderPausedError
from worker.limits.rate_limit import MAX_SHORT_PAUSE_S, RateLimiter

KEYS = Keys("rl")


def _limiter(redis: aioredis.Redis, *, rpm: int = 0, tpm: int = 0, model: str = "m") -> RateLimiter:
    return RateLimiter(redis, KEYS, "anthropic", model, rpm=rpm, tpm=tpm)


@pytest.fixture(name="second_client")
async def _fix_second_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """Another connection: a second worker process as far as Redis can tell."""
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.mark.parametrize("rpm", [3, 60, 300])
async def test_a_minute_of_requests_goes_at_once_then_the_next_waits_its_share(
    redis: aioredis.Redis, rpm: int
) -> None:
    limiter = _limiter(redis, rpm=rpm)
    started = time.monotonic()
    waits = [await limiter.acquire() for _ in range(rpm)]
    assert waits == [0.0] * rpm
    wait = await limiter.acquire()
    refilled_s = time.monotonic() - started  # the bucket refills while we draw from it
    assert 60 / rpm - refilled_s - 0.002 <= wait <= 60 / rpm + 0.002


async def test_every_worker_draws_from_the_same_bucket(
    redis: aioredis.Redis, second_client: aioredis.Redis
) -> None:
    a, b = _limiter(redis, rpm=10), _limiter(second_client, rpm=10)
    waits = await asyncio.gather(*[(a if i % 2 else b).acquire() for i in range(16)])
    assert sum(1 for w in waits if w == 0) == 10


async def test_the_bucket_refills_with_time(redis: aioredis.Redis) -> None:
    limiter = _limiter(redis, rpm=120)  # two a second
    for _ in range(120):
        await limiter.acquire()
    assert await limiter.acquire() > 0
    await asyncio.sleep(1.1)
    admitted = [await limiter.acquire() == 0 for _ in range(3)]
    assert admitted == [True, True, False]


@pytest.mark.parametrize(("tpm", "used"), [(600, 900), (1000, 1000), (60_000, 61_000)])
async def test_reported_tokens_make_the_next_call_wait_until_they_are_paid_back(
    redis: aioredis.Redis, tpm: int, used: int
) -> None:
    limiter = _limiter(redis, tpm=tpm)
    assert await limiter.acquire() == 0
    await limiter.charge(used)
    owed = used - tpm + 1  # the bucket started full; the next call needs one token back
    wait = await limiter.acquire()
    assert owed * 60 / tpm * 0.95 <= wait <= owed * 60 / tpm + 0.01


async def test_a_small_charge_within_the_minute_leaves_calls_free(redis: aioredis.Redis) -> None:
    limiter = _limiter(redis, tpm=10_000)
    await limiter.charge(4_000)
    await limiter.charge(4_000)
    assert await limiter.acquire() == 0


async def test_each_model_has_its_own_buckets(redis: aioredis.Redis) -> None:
    small, large = _limiter(redis, rpm=1, model="small"), _limiter(redis, rpm=1, model="large")
    assert await small.acquire() == 0
    assert await small.acquire() > 0
    assert await large.acquire() == 0


async def test_limits_off_admit_everything_and_keep_no_bucket(redis: aioredis.Redis) -> None:
    limiter = _limiter(redis)
    assert [await limiter.acquire() for _ in range(50)] == [0.0] * 50
    await limiter.charge(10**9)
    assert await redis.exists(KEYS.rate_limit("anthropic", "m")) == 0


@pytest.mark.parametrize(
    ("first_s", "second_s", "expected_s"),
    [(0.8, 0.2, 0.8), (0.2, 0.8, 0.8), (600.0, 1.0, MAX_SHORT_PAUSE_S)],
)
async def test_a_retry_after_holds_every_caller_and_the_longer_one_wins(
    redis: aioredis.Redis,
    second_client: aioredis.Redis,
    first_s: float,
    second_s: float,
    expected_s: float,
) -> None:
    worker_a, worker_b = _limiter(redis), _limiter(second_client, rpm=1000)
    await worker_a.pause_shortly(first_s, "429 from the provider")
    await worker_b.pause_shortly(second_s, "429 from the provider")
    for limiter in (worker_a, worker_b):
        wait = await limiter.acquire()
        assert expected_s - 0.1 <= wait <= expected_s
    # Only the provider is held: a backoff takes nothing from the buckets.
    await redis.delete(KEYS.short_pause("anthropic"))
    assert await worker_b.acquire() == 0


@pytest.mark.parametrize("rpm", [0, 60])
async def test_a_quota_pause_set_by_another_worker_refuses_the_call_and_takes_nothing(
    redis: aioredis.Redis, second_client: aioredis.Redis, rpm: int
) -> None:
    limiter = _limiter(redis, rpm=rpm)
    await Pauses(second_client, KEYS).pause("anthropic", 30, "quota prose")
    with pytest.raises(ProviderPausedError, match=r"anthropic observer paused for 3\d\.\d s more"):
        await limiter.acquire()
    await redis.delete(KEYS.pause("anthropic"))
    assert await limiter.acquire() == 0.0
    # Only the call after the pause drew from the bucket.
    if rpm:
        tokens = await redis.hget(KEYS.rate_limit("anthropic", "m"), "req")
        assert tokens is not None
        assert 58.9 < float(tokens) < 59.1
