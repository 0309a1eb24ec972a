"""The arq pool (a redis-py client with memq's job serializers) that workers run on."""

from __future__ import annotations

import asyncio

from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool
from redis.exceptions import RedisError

from worker.errors import ConfigError, RedisUnavailableError
from worker.redis_connect import describe_url, redis_url
from worker.scheduling import job_deserializer, job_serializer
from worker.settings import Settings


async def connect_arq(settings: Settings) -> ArqRedis:
    """Connect (starting the managed redis-server when no URL is set) and check with PING."""
    url = await asyncio.to_thread(redis_url, settings)
    try:
        pool = ConnectionPool.from_url(url, health_check_interval=30)
    except ValueError as e:
        raise ConfigError(f"MEMQ_REDIS_URL is not a Redis URL: {e}") from e
    redis = ArqRedis(
        connection_pool=pool,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        default_queue_name=f"{settings.prefix}:queue",
    )
    try:
        await redis.ping()
    except (RedisError, OSError) as e:
        await redis.aclose()
        raise RedisUnavailableError(f"cannot reach Redis at {describe_url(url)}: {e}") from e
    return redis
