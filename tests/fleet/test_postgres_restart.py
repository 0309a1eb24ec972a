"""PostgreSQL stopped and started again under two live `memq worker` processes: turns wait
for it (nothing dead-lettered, dropped or half-written), the workers keep running, /readyz
goes unready and comes back, and each worker logs the outage once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from arq.connections import ArqRedis

from pipeline.events import Event
from tests.support.fake_observer import FakeObserver
from tests.support.ingest import console_script, subprocess_env
from tests.support.ports import free_port
from tests.support.postgres_server import PostgresServer
from tests.support.probes import probe, sample
from tests.support.redis_server import RedisServer
from tests.support.worker_checks import dead_letters, unacked, wait_until
from tests.support.worker_harness import make_settings, publish, tool_call
from tests.support.worker_process import WorkerProcess, worker_env
from worker.settings import Settings

WORKERS = 2
SESSIONS = ("pa", "pb", "pc")
OUTAGE_S = 3.0


@pytest.fixture(name="own_postgres")
def _fix_own_postgres() -> Iterator[PostgresServer]:
    # Its own cluster: stopping the suite's shared one would fail every test beside this one.
    server = PostgresServer().start()
    yield server
    server.stop()


async def _rows(url: str) -> dict[str, int]:
    """Per-table counts, and the consistency checks: events without an observation, and
    observations whose event is not recorded as processed."""
    conn = await asyncpg.connect(url)
    try:
        return {
            "observations": await conn.fetchval("SELECT COUNT(*) FROM observations"),
            "processed": await conn.fetchval("SELECT COUNT(*) FROM processed_events"),
            "distinct_hashes": await conn.fetchval(
                "SELECT COUNT(DISTINCT content_hash) FROM observations"
            ),
        }
    finally:
        await conn.close()


async def _done(client: ArqRedis, settings: Settings, url: str, events: list[Event]) -> bool:
    for session in SESSIONS:
        if await unacked(client, settings, session) != (0, 0):
            return False
    try:
        return (await _rows(url))["processed"] >= len(events)
    except (OSError, asyncpg.PostgresError):
        return False


def _stats(env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [console_script(), "stats", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    return done.returncode, json.loads(done.stdout)


@pytest.mark.slow
async def test_postgres_restart_under_live_workers_loses_and_half_writes_nothing(
    tmp_path: Path,
    own_postgres: PostgresServer,
    own_redis: RedisServer,
    client: ArqRedis,
    fake_observer: FakeObserver,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = await own_postgres.create_database()
    settings = make_settings(tmp_path, own_redis.url, fake_observer.url, database_url=url)
    ports = [free_port() for _ in range(WORKERS)]
    workers: list[WorkerProcess] = []
    for i in range(WORKERS):
        data_dir = tmp_path / f"worker-{i}"
        data_dir.mkdir()
        env = worker_env(data_dir, own_redis.url, fake_observer, database_url=url)
        workers.append(
            WorkerProcess(env, tmp_path / f"worker-{i}.log", "--metrics-port", str(ports[i]))
        )
    ready = [f"http://127.0.0.1:{p}/readyz" for p in ports]
    stats_dir = tmp_path / "operator"
    stats_dir.mkdir()
    stats_env = subprocess_env(stats_dir, own_redis.url, MEMQ_DATABASE_URL=url, MEMQ_CHROMA="off")
    events: list[Event] = []
    try:
        before = [tool_call(s, n) for s in SESSIONS for n in range(2)]
        events += before
        await publish(client, settings, *before)
        await wait_until(
            lambda: _done(client, settings, url, events), timeout_s=60, what="first events"
        )
        await wait_until(
            lambda: all(probe(u)[0] == 200 for u in ready), timeout_s=30, what="workers ready"
        )

        await asyncio.to_thread(own_postgres.halt)
        stopped = time.monotonic()
        unready: list[str] = []
        stats_down: tuple[int, dict[str, Any]] | None = None
        metrics_down = ""
        n = 2
        # Live pace: a call per session every half second while the database is gone.
        while time.monotonic() - stopped < OUTAGE_S:
            batch = [tool_call(s, n) for s in SESSIONS]
            events += batch
            await publish(client, settings, *batch)
            n += 1
            for u in ready:
                status, body = await asyncio.to_thread(probe, u)
                if status == 503:
                    unready.append(body.strip())
            if stats_down is None and time.monotonic() - stopped > 1:
                stats_down = await asyncio.to_thread(_stats, stats_env)
                metrics_down = probe(f"http://127.0.0.1:{ports[0]}/metrics")[1]
            await asyncio.sleep(0.5)
        await asyncio.to_thread(own_postgres.resume)
        resumed = time.monotonic()
        await wait_until(
            lambda: _done(client, settings, url, events), timeout_s=60, what="events stored"
        )
        drained_s = time.monotonic() - resumed
        await wait_until(
            lambda: all(probe(u)[0] == 200 for u in ready), timeout_s=30, what="ready again"
        )
        ready_s = time.monotonic() - resumed
        metrics = [probe(f"http://127.0.0.1:{p}/metrics")[1] for p in ports]
        rows = await _rows(url)
        dead = await dead_letters(client, settings)
        running = [w.proc.poll() for w in workers]
    finally:
        for w in workers:
            w.stop()
    logs = [w.log_path.read_text(errors="replace") for w in workers]
    waits = sum(sample(m, "memq_store_waits_total") for m in metrics)
    with capsys.disabled():
        sys.stdout.write(
            f"\npostgres restart: outage {OUTAGE_S:.0f} s, published {len(events)},"
            f" stored {rows['observations']}, dead {len(dead)}; session jobs that waited for the"
            f" store {waits:.0f}; drained {drained_s:.1f} s and ready {ready_s:.1f} s after the"
            f" restart; unready answers {len(unready)} ({unready[:1]})\n"
        )
    assert running == [None] * WORKERS, logs
    assert dead == []
    # Exactly one observation per event (the fake observer answers one per tool call), each
    # event recorded as processed once, no observation twice.
    assert rows == {
        "observations": len(events),
        "processed": len(events),
        "distinct_hashes": len(events),
    }
    assert unready
    assert all(r.startswith("store unreachable") for r in unready)
    # What the operator saw while it lasted: memq stats fails (exit 1) yet shows Redis's side.
    assert stats_down is not None
    code, shown = stats_down
    assert code == 1
    assert shown["store"] is None
    assert shown["store_error"].startswith("cannot connect to PostgreSQL")
    assert "streams" in shown
    assert sample(metrics_down, "memq_store_reachable") == 0
    assert all(sample(m, "memq_store_reachable") == 1 for m in metrics)
    assert waits > 0  # turns did meet the outage, and waited instead of counting attempts
    for log in logs:
        assert log.count("store unreachable:") == 1, log  # one line for the outage
        assert "session job failed" not in log
        assert "retries exhausted" not in log
