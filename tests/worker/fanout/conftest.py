"""What the fan-out tests share: the SQLite store the rows live in, and a running web UI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.ui_harness import running_ui, ui_settings
from worker.storage.sqlite.store import SqliteStore


@pytest.fixture(name="store")
async def _fix_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "memq.db")
    yield store
    await store.aclose()


@pytest.fixture(name="base_url")
async def _fix_base_url(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> AsyncIterator[str]:
    async with running_ui(ui_settings(tmp_path, redis_url)) as url:
        yield url
