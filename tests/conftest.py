"""Fixtures shared by every test: a real redis-server per test session, settings, data dirs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.redis_server import RedisServer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(name="redis_server", scope="session")
def _fix_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    try:
        server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture(name="redis_url")
def _fix_redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture(name="redis")
async def _fix_redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client on a freshly flushed database of the session's private server."""
    client = aioredis.Redis.from_url(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture(name="modes_dir", scope="session")
def _fix_modes_dir() -> Path:
    return REPO / "modes"
