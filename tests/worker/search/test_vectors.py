"""Vector sync: the vector queue commits with its row, Chroma outages only lag, no duplicate ids."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import chromadb
import msgspec
import pytest
from chromadb.config import Settings as ChromaSettings

from pipeline.turns.content_hash import compute_observation_content_hash
from tests.support.chroma_down import closed_port_url, failing_chroma
from tests.support.embeddings import HashEmbeddingFunction
from worker.backoff import Backoff
from worker.errors import LeaseLostError
from worker.search.vector_index import (
    ChromaTarget,
    VectorIndex,
    chroma_target,
    collection_name,
    documents_for,
)
from worker.search.vector_sync import (
    SyncPolicy,
    VectorSync,
    index_opener,
    start_vector_sync,
    sync_backoff_s,
)
from worker.settings import Settings, load_settings
from worker.storage.records import BatchWrite, ObservationRow, StoredRow, SummaryRow
from worker.storage.sqlite.store import SqliteStore

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
HASH_EF = "tests.support.embeddings:make_hash_embedding"


def obs(
    title: str,
    narrative: str | None = "Narrative",
    *,
    facts: list[str] | None = None,
    session: str = "s1",
    subtitle: str | None = None,
) -> ObservationRow:
    return ObservationRow(
        memory_session_id=session,
        project="shop",
        type="bugfix",
        title=title,
        subtitle=subtitle,
        facts=facts or [],
        narrative=narrative,
        concepts=["gotcha"],
        files_read=[],
        files_modified=[],
        prompt_number=1,
        content_hash=compute_observation_content_hash(session, title, narrative, facts or []),
        created_at=T0,
    )


def summary(session: str = "s1") -> SummaryRow:
    return SummaryRow(
        memory_session_id=session,
        project="shop",
        request="Fix the login test",
        investigated="cookie flags",
        learned=None,
        completed="test passes",
        next_steps="",
        notes=None,
        prompt_number=1,
        created_at=T0,
    )


def batch(*observations: ObservationRow, fence: int = 1, **kw: Any) -> BatchWrite:
    return BatchWrite(
        memory_session_id="s1",
        project="shop",
        fence=fence,
        event_ids=[],
        observations=list(observations),
        **kw,
    )


class Clock:
    def __init__(self) -> None:
        self.now = T0.timestamp()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(name="store")
async def _fix_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "memq.db")
    yield store
    await store.aclose()


def settings_for(tmp_path: Path, chroma: str) -> Settings:
    return load_settings(
        {"MEMQ_DATA_DIR": str(tmp_path), "MEMQ_CHROMA": chroma, "MEMQ_EMBEDDING": HASH_EF}
    )


def embedded_sync(store: SqliteStore, tmp_path: Path, clock: Clock) -> VectorSync:
    settings = settings_for(tmp_path, "on")
    target = chroma_target(settings)
    assert target is not None
    return VectorSync(store, index_opener(settings, target), clock=clock, rng=lambda: 1.0)


def chroma_ids(tmp_path: Path) -> list[str]:
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    collection = client.get_collection(collection_name("memq", HashEmbeddingFunction.name()))
    return sorted(collection.get()["ids"])


async def vector_queue(path: Path) -> list[tuple[Any, ...]]:
    async with aiosqlite.connect(path) as conn:
        rows = await conn.execute_fetchall(
            "SELECT kind, row_id, state, attempts, last_error IS NOT NULL FROM vector_outbox"
            " ORDER BY kind, row_id"
        )
    return [tuple(r) for r in rows]


async def test_a_vector_queue_row_commits_with_each_new_row_only(store: SqliteStore) -> None:
    first = await store.write_batch(batch(obs("A"), obs("B"), summaries=[summary()]))
    again = await store.write_batch(batch(obs("A"), obs("C")))
    assert again.deduplicated == 1
    ids = [r.id for r in first.stored + again.stored if r.kind == "observation"]
    assert await vector_queue(store.path) == [
        *[("observation", i, "pending", 0, 0) for i in sorted(ids)],
        ("summary", first.stored[-1].id, "pending", 0, 0),
    ]
    assert await store.vector_lag() == 4


async def test_a_refused_batch_leaves_no_vector_queue_row(store: SqliteStore) -> None:
    await store.write_batch(batch(obs("A"), fence=5))
    with pytest.raises(LeaseLostError):
        await store.write_batch(batch(obs("B"), fence=4))
    assert [r[:2] for r in await vector_queue(store.path)] == [("observation", 1)]


def _row(**fields: Any) -> StoredRow:
    base: dict[str, Any] = {
        "kind": "observation",
        "id": 7,
        "memory_session_id": "s1",
        "project": "shop",
        "created_at": "2026-11-01T12:00:00.000Z",
        "type": "bugfix",
    }
    return StoredRow(**{**base, **fields})


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            _row(
                title="Login fixed", subtitle="cookie", narrative="Because.", facts=["a", " ", "b"]
            ),
            {
                "obs_7_title": "Login fixed — cookie",
                "obs_7_narrative": "Because.",
                "obs_7_fact_0": "a",
                "obs_7_fact_2": "b",
            },
        ),
        (_row(title=None, subtitle=None, narrative=None, facts=[]), {}),
        (_row(title="Only a title"), {"obs_7_title": "Only a title"}),
        (
            _row(title="T", files_modified=["a.py"], files_read=["a.py", "", "b.py"]),
            {"obs_7_title": "T", "obs_7_files": "a.py\nb.py"},
        ),
        (
            _row(kind="summary", type=None, request="Fix it", learned="", notes="n"),
            {"summary_7_request": "Fix it", "summary_7_notes": "n"},
        ),
    ],
)
def test_documents_have_deterministic_ids_and_skip_empty_text(
    row: StoredRow, expected: dict[str, str]
) -> None:
    docs = documents_for(row)
    assert {d.id: d.text for d in docs} == expected
    for d in docs:
        assert d.metadata["sqlite_id"] == 7
        assert d.metadata["created_at_epoch"] == int(T0.timestamp() * 1000)
        assert None not in d.metadata.values()


async def test_drain_indexes_every_document_once_even_when_repeated(
    store: SqliteStore, tmp_path: Path
) -> None:
    await store.write_batch(
        batch(obs("Login test", facts=["f1", "f2"]), obs("Cache TTL", None), summaries=[summary()])
    )
    sync = embedded_sync(store, tmp_path, Clock())
    assert await sync.drain() == 3
    assert await store.vector_lag() == 0
    expected = sorted(
        [
            "obs_1_title",
            "obs_1_narrative",
            "obs_1_fact_0",
            "obs_1_fact_1",
            "obs_2_title",
            "summary_1_request",
            "summary_1_investigated",
            "summary_1_completed",
        ]
    )
    assert chroma_ids(tmp_path) == expected
    # A reindex upserts the same ids again: the count does not move.
    assert (await store.start_reindex()).pending == 3
    assert await sync.drain() == 3
    await store.finish_reindex()
    assert chroma_ids(tmp_path) == expected


@contextmanager
def chroma_down(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "http-500":
        with failing_chroma() as (url, server):
            yield url
            assert server.requests > 0  # type: ignore[attr-defined]
    elif kind == "closed-port":
        yield closed_port_url()
    else:  # the embedded index's directory cannot be created: a file is in the way
        blocked = tmp_path / "blocked"
        blocked.mkdir()
        (blocked / "chroma").write_text("not a directory")
        yield "on"


@pytest.mark.parametrize("outage", ["http-500", "closed-port", "unusable-directory"])
async def test_chroma_outage_only_lags_then_drains_without_duplicates(
    store: SqliteStore, tmp_path: Path, outage: str
) -> None:
    clock = Clock()
    with chroma_down(outage, tmp_path) as chroma:
        data_dir = tmp_path / "blocked" if outage == "unusable-directory" else tmp_path
        settings = settings_for(data_dir, chroma)
        target = chroma_target(settings)
        assert target is not None
        down = VectorSync(store, index_opener(settings, target), clock=clock, rng=lambda: 1.0)
        lags = []
        for n in range(3):
            stored = await store.write_batch(batch(obs(f"Obs {n}", facts=[f"fact {n}"])))
            assert len(stored.stored) == 1  # storage goes on
            result = await down.drain_once()
            # Only the new row is due: the earlier ones are backing off.
            assert (result.indexed, result.failed) == (0, 1)
            lags.append(await store.vector_lag())
        assert lags == [1, 2, 3]
    rows = await vector_queue(store.path)
    assert all(r[2] == "pending" and r[3] >= 1 and r[4] == 1 for r in rows)
    # Backed off: nothing is due right away, so a retry storm is impossible.
    assert (await down.drain_once()).idle

    clock.now += SyncPolicy().backoff.max_s
    up = embedded_sync(store, tmp_path, clock)
    assert await up.drain() == 3
    assert await store.vector_lag() == 0
    assert chroma_ids(tmp_path) == sorted(
        [f"obs_{i}_{d}" for i in (1, 2, 3) for d in ("title", "narrative", "fact_0")]
    )


@pytest.mark.parametrize(
    ("attempts", "low", "high"),
    [(0, 0.5, 1.0), (1, 1.0, 2.0), (8, 128.0, 256.0), (9, 150.0, 300.0), (40, 150.0, 300.0)],
)
def test_backoff_doubles_with_jitter_and_is_capped(attempts: int, low: float, high: float) -> None:
    policy = SyncPolicy(backoff=Backoff(base_s=1.0, max_s=300.0))
    assert sync_backoff_s(attempts, policy, lambda: 0.0) == low
    assert sync_backoff_s(attempts, policy, lambda: 1.0) == high


async def test_run_backs_off_logs_one_warning_per_outage_and_recovers(
    store: SqliteStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await store.write_batch(batch(obs("A"), obs("B")))
    opens = {"n": 0, "up": False}
    index = VectorIndex.open(
        ChromaTarget(kind="embedded", path=str(tmp_path / "chroma")),
        "memq",
        HashEmbeddingFunction(),
    )

    def opener() -> VectorIndex:
        opens["n"] += 1
        if not opens["up"]:
            raise ConnectionError("chroma unreachable")
        return index

    policy = SyncPolicy(
        backoff=Backoff(base_s=0.02, max_s=0.08),
        probe=Backoff(base_s=0.02, max_s=0.08),
        poll_s=0.01,
    )
    sync = VectorSync(store, opener, policy=policy)
    caplog.set_level(logging.DEBUG, logger="worker.search.vector_sync")
    task = asyncio.create_task(sync.run())
    await asyncio.sleep(0.5)
    failed_opens = opens["n"]
    # Each row waits at least its own backoff: at most ~0.5 s / 0.04 s attempts, not thousands.
    assert 2 <= failed_opens <= 20
    assert await store.vector_lag() == 2
    opens["up"] = True
    for _ in range(100):
        if await store.vector_lag() == 0:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.vector_lag() == 0
    assert index.count() == 4
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "2 rows wait" in warnings[0].getMessage()
    assert any("reachable again" in r.getMessage() for r in caplog.records)


async def test_reindex_resumes_an_unfinished_run_instead_of_starting_over(
    store: SqliteStore, tmp_path: Path
) -> None:
    await store.write_batch(batch(obs("A"), obs("B"), obs("C")))
    sync = VectorSync(
        store,
        lambda: VectorIndex.open(
            ChromaTarget(kind="embedded", path=str(tmp_path / "chroma")),
            "memq",
            HashEmbeddingFunction(),
        ),
        policy=SyncPolicy(batch_rows=2),
    )
    await sync.drain()
    first = await store.start_reindex()
    assert (first.resumed, first.pending) == (False, 3)
    await sync.drain_once()  # interrupted after one batch of two
    again = await store.start_reindex()
    assert (again.resumed, again.pending) == (True, 1)
    await sync.drain()
    await store.finish_reindex()
    assert (await store.start_reindex()).pending == 3


async def test_reindex_of_one_project_leaves_the_others_indexed(store: SqliteStore) -> None:
    await store.write_batch(batch(obs("A")))
    other = msgspec.structs.replace(obs("B", session="s2"), project="blog")
    await store.write_batch(
        BatchWrite(
            memory_session_id="s2", project="blog", fence=1, event_ids=[], observations=[other]
        )
    )
    jobs = await store.claim_vector_jobs(limit=10, now_ms=0, lease_until_ms=1)
    await store.finish_vector_jobs([(j.kind, j.id) for j in jobs])
    assert (await store.start_reindex("blog")).pending == 1
    assert await store.vector_lag("blog") == 1
    assert await store.vector_lag("shop") == 0


async def test_background_sync_is_off_or_single_per_data_dir(
    store: SqliteStore, tmp_path: Path
) -> None:
    assert start_vector_sync(settings_for(tmp_path, "off"), store) is None
    first = start_vector_sync(settings_for(tmp_path, "on"), store)
    assert first is not None
    # A second process (or runtime) on the same data dir must not write the same directory.
    assert start_vector_sync(settings_for(tmp_path, "on"), store) is None
    await first.stop()
    again = start_vector_sync(settings_for(tmp_path, "on"), store)
    assert again is not None
    await again.stop()


def test_reopened_collection_finds_its_registered_embedding_function(tmp_path: Path) -> None:
    target = ChromaTarget(kind="embedded", path=str(tmp_path / "chroma"))
    index = VectorIndex.open(target, "memq", HashEmbeddingFunction(dimensions=32))
    index.collection.upsert(ids=["a"], documents=["login cookie expired"])
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    # No embedding function passed: chroma rebuilds it from the stored name and config.
    reopened = client.get_collection(collection_name("memq", HashEmbeddingFunction.name()))
    found = reopened.query(query_texts=["login cookie"], n_results=1)
    assert found["ids"] == [["a"]]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("off", None),
        ("on", ChromaTarget(kind="embedded", path="/data/chroma")),
        (
            "http://chroma.internal:9000",
            ChromaTarget(kind="http", host="chroma.internal", port=9000),
        ),
        (
            "https://vectors.example",
            ChromaTarget(kind="http", host="vectors.example", port=443, ssl=True),
        ),
    ],
)
def test_memq_chroma_names_the_index(value: str, expected: ChromaTarget | None) -> None:
    settings = load_settings({"MEMQ_CHROMA": value, "MEMQ_DATA_DIR": "/data"})
    assert chroma_target(settings) == expected


@pytest.mark.parametrize(
    ("prefix", "name"),
    [("memq", "memq-memq-memq-test-hash"), ("tenant_a.", "memq-tenant_a.-memq-test-hash")],
)
def test_collection_names_are_valid_for_chroma(prefix: str, name: str) -> None:
    assert collection_name(prefix, HashEmbeddingFunction.name()) == name
