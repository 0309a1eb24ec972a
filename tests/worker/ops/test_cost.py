"""The cost report: read from a real SQLite store, re-read only once it is too old."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from worker.ops.cost import CostReader, Prices
from worker.storage.records import BatchWrite, TokenUsage
from worker.storage.sqlite.store import SqliteStore


@pytest.fixture(name="store")
async def _fix_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "memq.db")
    yield store
    await store.aclose()


async def _spend(store: SqliteStore, tokens: int) -> None:
    usage = TokenUsage(memory_session_id="s1", project="p1", provider="openai", model="m",
                       input_tokens=tokens, cached_input_tokens=0, output_tokens=0,
                       created_at=datetime.now(UTC))  # fmt: skip
    await store.write_batch(
        BatchWrite(memory_session_id="s1", project="p1", fence=1, event_ids=[], usage=[usage])
    )


async def test_a_reader_with_a_max_age_reads_again_only_once_it_is_older(
    store: SqliteStore,
) -> None:
    now = [0.0]
    reader = CostReader(store, max_age_s=30, clock=lambda: now[0])
    await _spend(store, 100)
    assert (await reader.read()).input_tokens == 100
    await _spend(store, 50)
    now[0] = 29.9
    assert (await reader.read()).input_tokens == 100  # the cached report
    now[0] = 30.0
    assert (await reader.read()).input_tokens == 150


async def test_without_a_max_age_every_read_is_fresh_and_priced(store: SqliteStore) -> None:
    reader = CostReader(store, Prices(input=2, cached_input=1, output=4), days=1)
    await _spend(store, 1_000_000)
    first = await reader.read()
    await _spend(store, 500_000)
    second = await reader.read()
    assert (first.spend, second.spend) == (2.0, 3.0)
    assert second.window_days == 1
    assert second.first_day == second.last_day == datetime.now(UTC).date().isoformat()
    assert second.per_observation is None
