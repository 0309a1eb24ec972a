"""Reaching Redis from asyncio code: redis-py clients on MEMQ_REDIS_URL or the managed server.

Every client is built from `worker.connect.redis_url.parse_redis_url`, the one URL parser
(the hook's own small client, `worker.ingest.sync_redis`, reads URLs with it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.connect.managed_redis import DEFAULT_START_TIMEOUT_S, ManagedRedis
from worker.connect.redis_url import RedisAddress, parse_redis_url
from worker.connect.sentinel import SentinelUrl, sentinel_master
from worker.errors import RedisUnavailableError
from worker.masked_url import describe_url
from worker.settings import Settings

if TYPE_CHECKING:
    from redis.asyncio import ConnectionPool, Redis

__all__ = ["async_pool", "connect_redis", "redis_url"]


def redis_url(settings: Settings, *, start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> str:
    """MEMQ_REDIS_URL, or the managed server's socket URL (starting the server if needed)."""
    if settings.redis_url:
        return settings.redis_url
    managed = ManagedRedis(settings.data_path)
    managed.ensure_running(start_timeout_s)
    return managed.url


def async_pool(address: RedisAddress, **options: Any) -> ConnectionPool:
    """A redis-py asyncio pool on `address`; the URL's own options win, as in `from_url`."""
    from redis.asyncio import ConnectionPool
    from redis.asyncio.connection import (
        AbstractConnection,
        Connection,
        SSLConnection,
        UnixDomainSocketConnection,
    )

    classes: dict[str, type[AbstractConnection]] = {
        "redis": Connection,
        "rediss": SSLConnection,
        "unix": UnixDomainSocketConnection,
    }
    kwargs = {**options, **address.redis_kwargs()}
    return ConnectionPool(connection_class=classes[address.scheme], **kwargs)


async def connect_redis(settings: Settings, *, timeout_ms: int | None = None) -> Redis:
    """An asyncio redis-py client that answered PING; RedisUnavailableError otherwise."""
    import asyncio

    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    url = await asyncio.to_thread(redis_url, settings)
    timeout = timeout_ms / 1000 if timeout_ms else None
    target = parse_redis_url(url)
    if isinstance(target, SentinelUrl):
        client = sentinel_master(target, Redis, timeout_s=timeout)
    else:
        pool = async_pool(target, socket_timeout=timeout, socket_connect_timeout=timeout)
        client = Redis.from_pool(pool)  # the client owns the pool: aclose() closes it
    try:
        await client.ping()
    except (RedisError, OSError) as e:
        await client.aclose()
        raise RedisUnavailableError(f"cannot reach Redis at {describe_url(url)}: {e}") from e
    return client
