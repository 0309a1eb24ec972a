"""A Chroma server killed (`kill -9`) and started again under two live `memq worker`
processes on one PostgreSQL: storage goes on at its pace, the vector queue grows and shows in
`memq stats` and /metrics, drains once the server is back, and `memq search` from a third
process finds by vector the rows every worker stored."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from arq.connections import ArqRedis

from pipeline.events import Event, ToolCall
from tests.support.chroma_server import ChromaServer
from tests.support.embeddings import HashEmbeddingFunction
from tests.support.fake_observer import FakeObserver
from tests.support.ingest import console_script, subprocess_env
from tests.support.ports import free_port
from tests.support.postgres_server import PostgresServer
from tests.support.probes import probe, sample
from tests.support.redis_server import RedisServer
from tests.support.worker_checks import unacked, wait_until
from tests.support.worker_harness import make_settings, publish, tool_call
from tests.support.worker_process import WorkerProcess, worker_env
from worker.keys import Keys
from worker.search.vector_index import VectorIndex, chroma_target, documents_for
from worker.settings import Settings
from worker.storage.postgres.store import PostgresStore
from worker.storage.records import StoredRow

WORKERS = 2
SESSIONS = ("ca", "cb", "cc", "cd")
OUTAGE_S = 3.0
PACE_S = 0.5
"""Live pace: a tool call per session every half second while the server is gone."""
EMBEDDING = "tests.support.embeddings:make_hash_embedding"


@pytest.fixture(name="chroma")
def _fix_chroma() -> Iterator[ChromaServer]:
    server = ChromaServer().start()
    yield server
    server.stop()


def call(session: str, n: int) -> ToolCall:
    # Words of its own in each title: the test embedding hashes words into 64 dimensions, so
    # titles that differ by one word can collide; by three, hardly.
    command = f"echo {session} step {n} item{n}{session} mark{session}{n}"
    # Happening now, as live calls do: a row's age (the vector lag in time) counts from it.
    event = tool_call(session, n, tool_input={"command": command})
    return msgspec.structs.replace(event, occurred_at=datetime.now(UTC))


async def _stored(
    client: ArqRedis, settings: Settings, store: PostgresStore, events: list[Event]
) -> bool:
    for session in SESSIONS:
        if await unacked(client, settings, session) != (0, 0):
            return False
    return (await store.counts()).observations >= len(events)


def _memq(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run(
        [console_script(), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _sessions_stored_by(log: str) -> set[str]:
    found = set()
    for line in log.splitlines():
        if '"turn stored"' in line and (m := re.search(r'"session_id": "([^"]+)"', line)):
            found.add(m.group(1))
    return found


@pytest.mark.slow
async def test_chroma_server_killed_and_restarted_only_delays_the_vectors(
    tmp_path: Path,
    own_redis: RedisServer,
    client: ArqRedis,
    chroma: ChromaServer,
    fake_observer: FakeObserver,
    postgres_server: PostgresServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = await postgres_server.create_database()
    extra = {"database_url": url, "chroma": chroma.url, "embedding": EMBEDDING}
    settings = make_settings(tmp_path, own_redis.url, fake_observer.url, **extra)
    ports = [free_port() for _ in range(WORKERS)]
    workers = []
    for i in range(WORKERS):
        data_dir = tmp_path / f"worker-{i}"
        data_dir.mkdir()
        env = worker_env(data_dir, own_redis.url, fake_observer, **extra)
        workers.append(
            WorkerProcess(env, tmp_path / f"worker-{i}.log", "--metrics-port", str(ports[i]))
        )
    reader_dir = tmp_path / "reader"  # the third process: an agent host reading memories
    reader_dir.mkdir()
    reader = subprocess_env(
        reader_dir,
        own_redis.url,
        MEMQ_DATABASE_URL=url,
        MEMQ_CHROMA=chroma.url,
        MEMQ_EMBEDDING=EMBEDDING,
    )
    store = PostgresStore(url)
    events: list[Event] = []

    async def all_stored() -> bool:
        return await _stored(client, settings, store, events)

    try:
        first = [call(s, 0) for s in SESSIONS]
        events += first
        await publish(client, settings, *first)
        await wait_until(all_stored, timeout_s=60, what="first events")
        await wait_until(lambda: _lag_is(store, 0), timeout_s=60, what="the first rows indexed")
        await asyncio.to_thread(chroma.kill)
        killed = time.monotonic()
        n = 1
        latencies: list[float] = []
        stats_run: asyncio.Task[Any] | None = None
        while time.monotonic() - killed < OUTAGE_S:
            batch = [call(s, n) for s in SESSIONS]
            events += batch
            published = time.monotonic()
            await publish(client, settings, *batch)
            await wait_until(all_stored, timeout_s=30, what="events stored while Chroma is down")
            latencies.append(time.monotonic() - published)
            n += 1
            if stats_run is None:  # an operator looks while it is down (a process of its own)
                stats_run = asyncio.create_task(asyncio.to_thread(_memq, reader, "stats", "--json"))
            await asyncio.sleep(max(0.0, PACE_S - (time.monotonic() - published)))
        assert not chroma.running
        lag_down = await store.vector_lag()
        assert stats_run is not None
        stats = await stats_run
        metrics = [probe(f"http://127.0.0.1:{p}/metrics")[1] for p in ports]
        ready = [probe(f"http://127.0.0.1:{p}/readyz")[0] for p in ports]
        await asyncio.to_thread(chroma.start)
        restarted = time.monotonic()
        await wait_until(lambda: _lag_is(store, 0), timeout_s=60, what="the queue drained")
        drained_s = time.monotonic() - restarted
        rows = await store.observations(limit=10_000)
        feed = [
            (f[b"kind"].decode(), int(f[b"id"]))
            for _, f in await client.xrange(Keys(settings.prefix).feed)
        ]
        running = [w.proc.poll() for w in workers]
        logs = [w.log_path.read_text(errors="replace") for w in workers]
        # One row of each worker's, searched by vector alone from the third process.
        by_worker = [_sessions_stored_by(log) for log in logs]
        picks: list[StoredRow] = []
        for mine in by_worker:  # sessions move between workers: a row not picked yet
            picks += [next(r for r in rows if r.memory_session_id in mine and r not in picks)]
        vector_search = ("search", "--mode", "vector", "--json", "--limit", "3")
        searches = [asyncio.to_thread(_memq, reader, *vector_search, r.title or "") for r in picks]
        hits = dict(zip([r.id for r in picks], await asyncio.gather(*searches), strict=True))
        target = chroma_target(settings)
        assert target is not None
        index = VectorIndex.open(target, settings.prefix, HashEmbeddingFunction())
        ids = index.collection.get()["ids"]
    finally:
        for w in workers:
            w.stop()
        await store.aclose()
        await postgres_server.drop_database(url)
    outage_rows = len(events) - len(first)
    with capsys.disabled():
        sys.stdout.write(
            f"\nchroma restart: outage {OUTAGE_S:.0f} s, {outage_rows} events stored meanwhile"
            f" (publish to stored {min(latencies):.2f}-{max(latencies):.2f} s), queue"
            f" {lag_down} rows at the restart, drained {drained_s:.1f} s after it;"
            f" stats vector_lag {stats['vector_lag']}, /metrics memq_vector_lag"
            f" {[sample(m, 'memq_vector_lag') for m in metrics]}\n"
        )
    assert running == [None] * WORKERS
    # Storage went on: every event stored and announced while the index was gone.
    assert len(rows) == len(events)
    # Announced at least once each (the outbox may send a row twice; feed readers dedupe).
    assert set(feed) == {("observation", r.id) for r in rows}, feed
    assert lag_down >= outage_rows
    assert stats["vector_lag"] >= len(SESSIONS)  # at least the first batch of the outage
    assert all(sample(m, "memq_vector_lag") >= outage_rows for m in metrics)
    # The lag in time: the oldest waiting row was stored when the outage began, or after.
    assert 0 < stats["vector_oldest_pending_s"] <= OUTAGE_S + 30
    assert all(sample(m, "memq_vector_oldest_pending_seconds") > 0 for m in metrics)
    assert ready == [200] * WORKERS  # the index is not the store: the workers stay ready
    # Every stored row has its vectors, each once (deterministic ids).
    assert sorted(ids) == sorted(d.id for r in rows for d in documents_for(r))
    # Both workers stored sessions, and a third process finds a row of each by vector alone.
    assert all(by_worker), by_worker
    assert len(hits) == WORKERS
    assert all(row_id in [h["id"] for h in found] for row_id, found in hits.items()), hits
    for log in logs:
        assert log.count("vector index unavailable") <= 1, log
        assert "Traceback" not in log
    assert sum("vector index reachable again" in log for log in logs) >= 1


async def _lag_is(store: PostgresStore, n: int) -> bool:
    return await store.vector_lag() == n
