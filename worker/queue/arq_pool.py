"""The arq pool (a redis-py client with memq's job serializers) that workers run on."""

from __future__ import annotations

import asyncio
from typing import Any

from arq.connections import ArqRedis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import RedisError

from worker.connect.redis_client import async_pool, redis_url
from worker.connect.redis_url import parse_redis_url
from worker.connect.sentinel import SentinelUrl, sentinel_master
from worker.errors import RedisUnavailableError
from worker.masked_url import describe_url
from worker.queue.scheduling import job_deserializer, job_serializer
from worker.settings import Settings

RIDE_OUT_RETRIES = 10
"""Once connected, (re)connecting to Redis is tried 10 more times (0.1 s doubling to 1 s,
~7.5 s in all): a Redis restart or a Sentinel failover does not stop the worker."""


def _connection_options() -> dict[str, Any]:
    # No retries for the first PING: a CLI command against a Redis that is down fails at once.
    return {"socket_connect_timeout": 5, "retry": Retry(NoBackoff(), 0)}


async def connect_arq(settings: Settings) -> ArqRedis:
    """Connect (starting the managed redis-server when no URL is set) and check with PING."""
    url = await asyncio.to_thread(redis_url, settings)
    target = parse_redis_url(url)  # the one parser every memq client is built from
    if isinstance(target, SentinelUrl):
        return await _connect_sentinel(settings, target, url)
    pool = async_pool(target, health_check_interval=30, **_connection_options())
    redis = ArqRedis(
        connection_pool=pool,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        default_queue_name=f"{settings.prefix}:queue",
    )
    # The pool is ours alone: aclose() must close its connections too (redis-py leaves a
    # pool passed in open, and every caller's `aclose()` then leaked a socket).
    redis.auto_close_connection_pool = True
    return await _checked(redis, url)


async def _connect_sentinel(settings: Settings, parsed: SentinelUrl, url: str) -> ArqRedis:
    """The master the sentinels name, as arq's `RedisSettings(sentinel=True, …)` connects."""
    redis = sentinel_master(parsed, ArqRedis, **_connection_options())
    redis.job_serializer = job_serializer
    redis.job_deserializer = job_deserializer
    redis.default_queue_name = f"{settings.prefix}:queue"
    return await _checked(redis, url)


async def _checked(redis: ArqRedis, url: str) -> ArqRedis:
    """PING once (no retries), then let commands ride out a short outage."""
    try:
        await redis.ping()
    except (RedisError, OSError) as e:
        await redis.aclose()
        raise RedisUnavailableError(f"cannot reach Redis at {describe_url(url)}: {e}") from e
    # Reconnects retry (a refused connection is an OSError); a command already sent is not
    # repeated, since it may have run.
    retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), RIDE_OUT_RETRIES)
    retry.update_supported_errors([OSError])
    redis.set_retry(retry)
    return redis
