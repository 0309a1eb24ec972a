"""Fixtures of the fault tests: a Redis of their own (they restart and kill servers)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from tests.support.redis_server import RedisServer


@pytest.fixture(name="own_redis")
def _fix_own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture(name="client")
async def _fix_client(own_redis: RedisServer) -> AsyncIterator[ArqRedis]:
    client = ArqRedis.from_url(own_redis.url)
    yield client
    await client.aclose()
