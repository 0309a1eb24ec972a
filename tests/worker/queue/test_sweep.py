"""The sweep cron's pruning of processed_events: at most once an hour per process, by age."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver
from tests.support.worker_harness import make_settings, running_runtime
from worker.sessions.jobs import (
    PROCESSED_RETENTION,
    PRUNE_EVERY_S,
    PRUNED_AT,
    prune_due,
    sweep_sessions,
)
from worker.storage.protocol import Store
from worker.storage.records import BatchWrite


def test_pruning_is_due_at_most_once_an_hour_per_process() -> None:
    ctx: dict[str, Any] = {}
    other: dict[str, Any] = {}
    assert prune_due(ctx, 1000.0)  # the first sweep of a process prunes
    assert not prune_due(ctx, 1000.0 + 10)
    assert not prune_due(ctx, 1000.0 + PRUNE_EVERY_S - 0.5)
    assert prune_due(other, 1000.0 + 10)  # another process keeps its own time
    assert prune_due(ctx, 1000.0 + PRUNE_EVERY_S)
    assert not prune_due(ctx, 1000.0 + PRUNE_EVERY_S + 10)


async def _processed(store: Store, event_id: str, at: datetime) -> None:
    batch = BatchWrite(
        memory_session_id="s1", project="p", fence=1, event_ids=[event_id], occurred_at=at
    )
    await store.write_batch(batch)


async def test_the_sweep_prunes_ids_older_than_the_retention_once_an_hour(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    now = datetime.now(UTC)
    ids = ["old", "recent", "old-later"]
    async with running_runtime(settings, arq_redis) as rt:
        await _processed(rt.store, "old", now - PROCESSED_RETENTION - timedelta(minutes=1))
        await _processed(rt.store, "recent", now - PROCESSED_RETENTION + timedelta(hours=1))
        ctx: dict[str, Any] = {"runtime": rt}
        assert await sweep_sessions(ctx) == 0
        assert await rt.store.processed_event_ids("s1", ids) == {"recent"}
        await _processed(rt.store, "old-later", now - PROCESSED_RETENTION - timedelta(days=1))
        await sweep_sessions(ctx)  # the same hour: nothing pruned
        assert await rt.store.processed_event_ids("s1", ids) == {"recent", "old-later"}
        ctx[PRUNED_AT] -= PRUNE_EVERY_S
        await sweep_sessions(ctx)
        assert await rt.store.processed_event_ids("s1", ids) == {"recent"}


async def test_a_failed_pruning_is_logged_and_the_sweep_still_completes(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    async with running_runtime(settings, arq_redis) as rt:
        async with aiosqlite.connect(settings.data_path / "memq.db") as conn:
            await conn.execute("ALTER TABLE processed_events RENAME TO gone")
            await conn.commit()
        ctx: dict[str, Any] = {"runtime": rt}
        with caplog.at_level(logging.WARNING, logger="worker.sessions.jobs"):
            assert await sweep_sessions(ctx) == 0
    (record,) = [r for r in caplog.records if r.name == "worker.sessions.jobs"]
    assert "pruning processed_events failed" in record.getMessage()
    assert "no such table: processed_events" in record.getMessage()
    assert PRUNED_AT in ctx
