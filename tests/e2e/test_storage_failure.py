"""A malformed database: the paid reply is kept and committed on retry, never asked again;
repeated storage failures count as attempts and dead-letter the turn; /readyz says not ready.

Real Redis, the real worker and a really malformed SQLite file (the observations table's pages
overwritten on disk).
"""

from __future__ import annotations

import asyncio
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from pipeline.outcomes import JobResult
from tests.support.fake_observer import FakeObserver
from tests.support.worker_checks import dead_letters, observations, outcomes, unacked
from tests.support.worker_harness import (
    drain,
    make_settings,
    publish,
    running_runtime,
    tool_call,
)
from worker.keys import Keys
from worker.ops.health import serve_health
from worker.sessions.jobs import build_runtime, close_runtime
from worker.sessions.session_run import observe
from worker.settings import Settings
from worker.telemetry.metrics import Metrics


def _malform_observations(db: Path, name: str = "observations_created") -> bytes:
    """Overwrite an index every new observation goes into (not one a read at startup uses):
    each commit of an observation fails; returns the file's bytes before."""
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        roots = [r for (r,) in conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)
        )]  # fmt: skip
    conn.close()
    original = db.read_bytes()
    with db.open("r+b") as f:
        for root in roots:
            f.seek((root - 1) * page_size)
            f.write(b"\xa5" * page_size)
    return original


async def _store_one(settings: Settings, redis: ArqRedis) -> None:
    await publish(redis, settings, tool_call("ok", 1))
    async with running_runtime(settings, redis) as rt:
        await drain(rt, redis)


async def test_a_failing_commit_keeps_the_reply_counts_attempts_and_dead_letters(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, max_attempts="3")
    await _store_one(settings, arq_redis)
    assert len(fake_observer.requests) == 1
    _malform_observations(settings.data_path / "memq.db")
    await publish(arq_redis, settings, tool_call("m1", 1))
    results = []
    async with running_runtime(settings, arq_redis) as rt:
        for job in range(1, 4):
            results.append(await observe(rt, "m1", rt.keys.job_id("m1", job)))
    # The third attempt dead-letters the turn; the job then finds the stream drained.
    assert results == [JobResult.RETRY, JobResult.RETRY, JobResult.DRAINED]
    assert len(fake_observer.requests) == 2  # the one turn was asked once, not on every retry
    [dead] = await dead_letters(arq_redis, settings)
    assert "retries exhausted: storage failed: SQLite " in dead["reason"]
    assert dead["reason"].endswith("database disk image is malformed")
    counts = await outcomes(arq_redis, settings)
    assert (counts["retry"], counts["dead"]) == (2, 1)
    assert await unacked(arq_redis, settings, "m1") == (0, 0)
    assert not await arq_redis.exists(Keys(settings.prefix).kept("m1"))


async def test_storage_failing_before_the_turn_counts_too_and_the_observer_is_asked_once(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, max_attempts="3")
    await _store_one(settings, arq_redis)
    # The replay guard's table: the commit writes it, and a retry reads it first.
    _malform_observations(settings.data_path / "memq.db", "processed_events")
    await publish(arq_redis, settings, tool_call("p1", 1))
    results = []
    async with running_runtime(settings, arq_redis) as rt:
        for job in range(1, 4):
            results.append(await observe(rt, "p1", rt.keys.job_id("p1", job)))
    assert results == [JobResult.RETRY, JobResult.RETRY, JobResult.DRAINED]
    assert len(fake_observer.requests) == 2  # one for "ok", one for p1's turn
    [dead] = await dead_letters(arq_redis, settings)
    assert dead["reason"].startswith("retries exhausted: storage failed: SQLite ")
    counts = await outcomes(arq_redis, settings)
    assert (counts["retry"], counts["dead"]) == (2, 1)
    assert await unacked(arq_redis, settings, "p1") == (0, 0)
    # The first attempt's commit failed; the next two failed reading the replay guard.
    assert sum("commit failed" in r.getMessage() for r in caplog.records) == 1


async def test_a_commit_that_fails_once_is_committed_from_the_kept_reply(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await _store_one(settings, arq_redis)
    db = settings.data_path / "memq.db"
    original = _malform_observations(db)
    await publish(arq_redis, settings, tool_call("m2", 1))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "m2", rt.keys.job_id("m2", 1)) is JobResult.RETRY
    db.write_bytes(original)  # the disk is repaired
    # A call published meanwhile waits for the kept turn: its own turn comes after.
    await publish(arq_redis, settings, tool_call("m2", 2))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "m2", rt.keys.job_id("m2", 2)) is JobResult.DRAINED
    assert len(fake_observer.requests) == 1 + 2  # m2's first turn once, its second once
    assert len(await observations(settings, "m2")) == 2
    counts = await outcomes(arq_redis, settings)
    assert counts["retry"] == 1
    assert counts.get("dead", 0) == 0
    assert await unacked(arq_redis, settings, "m2") == (0, 0)


async def _get(url: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.read().decode()

    return await asyncio.to_thread(fetch)


async def test_readyz_is_not_ready_while_commits_fail_and_ready_once_one_works(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await _store_one(settings, arq_redis)
    db = settings.data_path / "memq.db"
    original = _malform_observations(db)
    await publish(arq_redis, settings, tool_call("r1", 1))
    metrics = Metrics()
    async with serve_health(settings, arq_redis, metrics, host="127.0.0.1", port=0) as health:
        url = health.url
        assert await _get(f"{url}/readyz") == (200, "ready\n")
        rt = await build_runtime(settings, arq_redis, metrics)
        try:
            assert await observe(rt, "r1", rt.keys.job_id("r1", 1)) is JobResult.RETRY
            failing = await _get(f"{url}/readyz")
        finally:
            await close_runtime(rt)
        db.write_bytes(original)  # repaired; a restarted worker (the same process' metrics)
        rt = await build_runtime(settings, arq_redis, metrics)
        try:
            assert await observe(rt, "r1", rt.keys.job_id("r1", 2)) is JobResult.DRAINED
            ready = await _get(f"{url}/readyz")
        finally:
            await close_runtime(rt)
    status, body = failing
    assert status == 503
    assert body.startswith("store failing commits: storage failed: SQLite ")
    assert body.endswith("database disk image is malformed\n")
    assert body.count("\n") == 1
    assert ready == (200, "ready\n")
