"""Fixtures shared by every test: a real redis-server per test session, settings, data dirs."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from arq.connections import ArqRedis, RedisSettings, create_pool

from tests.support.redis_server import RedisServer
from worker.queue.scheduling import job_deserializer, job_serializer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _fix_private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test (nor a subprocess it starts) may touch the developer's real data dir."""
    old = os.environ.get("MEMQ_DATA_DIR")
    os.environ["MEMQ_DATA_DIR"] = str(tmp_path_factory.mktemp("memq-data"))
    yield
    if old is None:
        os.environ.pop("MEMQ_DATA_DIR", None)
    else:
        os.environ["MEMQ_DATA_DIR"] = old


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


# The loopback fake of the Anthropic Messages and OpenAI Chat Completions APIs.
from tests.support.fake_observer import fake_observer_fixture  # noqa: E402, F401

# A private PostgreSQL cluster (initdb/pg_ctl on a free port), started once when first used.
from tests.support.postgres_server import postgres_server_fixture  # noqa: E402, F401


@pytest.fixture(name="arq_redis")
async def _fix_arq_redis(redis_url: str) -> AsyncIterator[ArqRedis]:
    """An arq pool on a freshly flushed database, with memq's job serializers."""
    pool = await create_pool(
        RedisSettings.from_dsn(redis_url),
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
    )
    await pool.flushdb()
    yield pool
    await pool.aclose()
