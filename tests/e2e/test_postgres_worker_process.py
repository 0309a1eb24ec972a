"""`memq worker` as an OS process on PostgreSQL: stored once, announced, acked; SIGTERM exits 0."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
from arq.connections import ArqRedis

from pipeline.events import Event
from tests.support.fake_observer import FakeObserver
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.worker_checks import unacked, wait_until
from tests.support.worker_harness import make_settings, publish, tool_call
from tests.support.worker_process import WorkerProcess, worker_env
from worker.keys import Keys
from worker.settings import Settings
from worker.storage.postgres.store import PostgresStore
from worker.storage.records import BatchWrite

SESSIONS = ("pg1", "pg2", "pg3")
CALLS = 4


async def _stored_rows(url: str) -> list[tuple[str, int, str | None]]:
    """(kind, id, announced_at) of every observation and summary."""
    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetch(
            "SELECT 'observation', id, announced_at FROM observations"
            " UNION ALL SELECT 'summary', id, announced_at FROM summaries ORDER BY 1, 2"
        )
    finally:
        await conn.close()
    return [(str(r[0]), int(r[1]), r[2]) for r in found]


async def _everything_done(
    store: PostgresStore, arq_redis: ArqRedis, settings: Settings, events: list[Event]
) -> bool:
    for session in SESSIONS:
        ids = [e.event_id for e in events if e.memory_session_id == session]
        if await store.processed_event_ids(session, ids) != set(ids):
            return False
        if await unacked(arq_redis, settings, session) != (0, 0):
            return False
    return not await store.unannounced()


async def _pruned(store: PostgresStore) -> bool:
    return not await store.processed_event_ids("ancient", ["ancient-1"])


@pytest.mark.slow
async def test_a_worker_process_on_postgresql_stores_announces_and_acks_every_event(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    postgres_server: PostgresServer,
) -> None:
    url = await postgres_server.create_database()
    settings = make_settings(tmp_path, redis_url, fake_observer.url, database_url=url)
    env = worker_env(tmp_path, redis_url, fake_observer, database_url=url)
    calls = [tool_call(s, n) for s in SESSIONS for n in range(CALLS)]
    # The same tool call under another event id: the content hash keeps one row of the two.
    again = tool_call("pg1", 0)
    assert again.event_id != calls[0].event_id
    events: list[Event] = [*calls, again]
    store = PostgresStore(url)
    worker: WorkerProcess | None = None
    try:
        # A replay-guard row a month old: the worker's first sweep prunes it.
        await store.write_batch(
            BatchWrite(
                memory_session_id="ancient",
                project="demo",
                fence=1,
                event_ids=["ancient-1"],
                occurred_at=datetime.now(UTC) - timedelta(days=30),
            )
        )
        worker = WorkerProcess(env, tmp_path / "worker.log")
        await publish(arq_redis, settings, *events)
        await wait_until(
            lambda: _everything_done(store, arq_redis, settings, events),
            timeout_s=15,
            what="every event stored, announced and acked",
        )
        # The startup sweep runs beside the first jobs, not before them: wait for it too.
        await wait_until(lambda: _pruned(store), timeout_s=15, what="the first sweep's pruning")
        rows = await _stored_rows(url)
        sessions = {s.memory_session_id: s for s in await store.sessions()}
        feed = await arq_redis.xrange(Keys(settings.prefix).feed)
        ancient = await store.processed_event_ids("ancient", ["ancient-1"])
        assert worker.proc.poll() is None, worker.log_path.read_text()
        worker.signal(signal.SIGTERM)
        signalled = time.monotonic()
        code = await asyncio.to_thread(worker.wait, 10)
        took = time.monotonic() - signalled
    finally:
        if worker is not None:
            worker.stop()
        await store.aclose()
        await postgres_server.drop_database(url)

    assert code == 0, worker.log_path.read_text()
    assert took < 5, f"SIGTERM took {took:.1f}s"
    # One observation per distinct tool call, none for the duplicate.
    assert [kind for kind, _, _ in rows] == ["observation"] * len(calls)
    assert {s: sessions[s].observations for s in SESSIONS} == dict.fromkeys(SESSIONS, CALLS)
    assert all(announced_at is not None for _, _, announced_at in rows)
    announced = [(f[b"kind"].decode(), int(f[b"id"])) for _, f in feed]
    assert sorted(announced) == [(kind, row_id) for kind, row_id, _ in rows]
    assert ancient == set()
    assert "pruning processed_events failed" not in worker.log_path.read_text()
