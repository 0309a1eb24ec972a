"""The vector sync through outages: rows are not charged an attempt per probe, every process
says when the index is back, and a storage outage is not reported as the index's."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from chromadb.api.types import Documents, Embeddings

from tests.support.embeddings import HashEmbeddingFunction
from tests.support.ports import free_port
from tests.support.postgres_server import PostgresServer
from tests.worker.search.test_vectors import batch, obs, vector_queue
from worker.backoff import Backoff
from worker.search.vector_index import ChromaTarget, VectorIndex
from worker.search.vector_sync import SyncPolicy, VectorSync
from worker.storage.postgres.store import PostgresStore
from worker.storage.protocol import StoreUnavailableError
from worker.storage.sqlite.store import SqliteStore

FAST = SyncPolicy(
    backoff=Backoff(base_s=0.02, max_s=0.05),
    probe=Backoff(base_s=0.02, max_s=0.05),
    poll_s=0.01,
)


class Switch:
    """An index opener that fails until switched on (a Chroma server down, then back)."""

    def __init__(self, index: VectorIndex) -> None:
        self.index = index
        self.up = False
        self.opens = 0

    def __call__(self) -> VectorIndex:
        self.opens += 1
        if not self.up:
            raise ConnectionError("chroma unreachable")
        return self.index


def embedded_index(tmp_path: Path) -> VectorIndex:
    target = ChromaTarget(kind="embedded", path=str(tmp_path / "chroma"))
    return VectorIndex.open(target, "memq", HashEmbeddingFunction())


async def until(check: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check() if asyncio.iscoroutinefunction(check) else not check():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.01)


async def test_rows_stored_during_an_outage_are_not_charged_attempts_and_drain_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore(tmp_path / "memq.db")
    switch = Switch(embedded_index(tmp_path))
    caplog.set_level(logging.INFO, logger="worker.search.vector_sync")
    task = asyncio.create_task(VectorSync(store, switch, policy=FAST).run())
    try:
        await store.write_batch(batch(obs("First")))
        await until(lambda: switch.opens >= 1)
        for n in range(3):  # stored while the loop probes, ~every 0.05 s
            await store.write_batch(batch(obs(f"During {n}"), fence=1))
            await asyncio.sleep(0.1)
        probes = switch.opens
        rows = await vector_queue(store.path)
        switch.up = True

        async def drained() -> bool:
            return await store.vector_lag() == 0

        await until(drained)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.aclose()
    assert probes >= 4  # it kept probing, on its short backoff
    # Only the batch that met the outage counted an attempt; the probes charged no row.
    assert [r[3] for r in rows] == [1, 0, 0, 0]
    assert switch.index.count() == 4 * 2  # title and narrative of each
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len([m for m in messages if "unavailable" in m]) == 1
    assert [m for m in messages if "reachable again" in m] == [
        "vector index reachable again; 0 rows wait"
    ]


async def test_a_process_whose_rows_another_indexed_still_says_the_index_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore(tmp_path / "memq.db")
    index = embedded_index(tmp_path)
    switch = Switch(index)
    caplog.set_level(logging.INFO, logger="worker.search.vector_sync")
    task = asyncio.create_task(VectorSync(store, switch, policy=FAST).run())
    try:
        await store.write_batch(batch(obs("A")))
        await until(lambda: any("unavailable" in r.getMessage() for r in caplog.records))
        # Another worker indexes everything first: this one finds nothing due once it is up.
        await asyncio.sleep(0.1)  # past the failed row's backoff
        assert await VectorSync(store, lambda: index).drain() == 1
        switch.up = True
        await until(lambda: any("reachable again" in r.getMessage() for r in caplog.records))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.aclose()


async def test_an_unreachable_store_is_not_reported_as_the_index_failing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresStore(f"postgresql://memq@127.0.0.1:{free_port()}/memq")
    switch = Switch(embedded_index(tmp_path))
    switch.up = True
    caplog.set_level(logging.DEBUG)
    task = asyncio.create_task(VectorSync(store, switch, policy=FAST).run())
    try:
        await asyncio.sleep(0.5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.aclose()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith("store unreachable: cannot connect to PostgreSQL")
    waits = [r for r in caplog.records if "vector sync waits for the store" in r.getMessage()]
    assert len(waits) >= 2  # it kept trying, quietly
    assert switch.opens == 0  # and never blamed (or touched) the index


class HaltingEmbedding(HashEmbeddingFunction):
    """Stops PostgreSQL the first time it embeds: the store goes away mid-batch, after the
    claim and before the batch is marked indexed."""

    def __init__(self, server: PostgresServer) -> None:
        super().__init__()
        self.server = server

    def __call__(self, input: Documents) -> Embeddings:
        if self.calls == 0:
            self.server.halt()
        return super().__call__(input)


async def test_rows_indexed_as_the_store_went_away_are_marked_once_it_is_back(
    tmp_path: Path,
) -> None:
    server = PostgresServer().start()
    try:
        url = await server.create_database()
        store = PostgresStore(url)
        await store.write_batch(batch(obs("A"), obs("B")))
        target = ChromaTarget(kind="embedded", path=str(tmp_path / "chroma"))
        index = VectorIndex.open(target, "memq", HaltingEmbedding(server))
        sync = VectorSync(store, lambda: index, policy=FAST)
        with pytest.raises(StoreUnavailableError):
            await sync.drain_once()  # indexed, then the store was gone for the bookkeeping
        assert index.count() == 4
        await asyncio.to_thread(server.resume)
        # Marked at once, not after the claim's lease of minutes ran out.
        assert await sync.drain() == 0
        assert await store.vector_lag() == 0
        await store.aclose()
    finally:
        server.stop()


async def test_rows_a_killed_worker_had_claimed_are_indexed_by_another_a_minute_later(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "memq.db")
    await store.write_batch(batch(obs("A"), obs("B")))
    index = embedded_index(tmp_path)
    now = [1_800_000_000.0]
    # A worker's sync claims the rows, and the worker dies while it embeds them: its index
    # opener never returns (freed at the end so the thread can go).
    dying = threading.Event()

    def hung_open() -> VectorIndex:
        dying.wait(30)
        raise ConnectionError("the worker was killed")

    killed = VectorSync(store, hung_open, clock=lambda: now[0])
    task = asyncio.create_task(killed.drain_once())
    await until(lambda: _claimed(store.path, now[0]) == 2, timeout_s=10)
    task.cancel()
    other = VectorSync(store, lambda: index, clock=lambda: now[0])
    try:
        now[0] += 59
        assert await other.drain() == 0  # still the killed worker's claim
        now[0] += 2
        assert await other.drain() == 2  # docs/fleet.md: "wait out the claim (1 minute)"
    finally:
        dying.set()
    assert index.count() == 4  # two documents a row
    assert await store.vector_lag() == 0
    await store.aclose()


def _claimed(path: Path, now_s: float) -> int:
    """Rows a sync holds: a claim moves a row's next attempt to the end of its lease."""
    with sqlite3.connect(path) as conn:
        query = "SELECT count(*) FROM vector_outbox WHERE next_attempt_at_ms > ?"
        (n,) = conn.execute(query, (int(now_s * 1000),)).fetchone()
    return int(n)
