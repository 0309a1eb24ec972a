"""Both Stores (a real SQLite file, a private PostgreSQL): schema, batches, fencing, reads."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
import pytest

from pipeline.turns.content_hash import compute_observation_content_hash
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.store_backends import BACKENDS, Backend, backend_fixture  # noqa: F401
from worker.errors import ConfigError, LeaseLostError
from worker.settings import Settings
from worker.storage.factory import open_store
from worker.storage.postgres import schema as postgres_schema
from worker.storage.postgres.store import PostgresStore
from worker.storage.protocol import Store, StoreError
from worker.storage.records import (
    BatchWrite,
    DroppedOutput,
    DroppedRow,
    ObservationRow,
    PromptRow,
    SessionRow,
    StoredRow,
    SummaryRow,
    TokenUsage,
)
from worker.storage.sqlite import schema as sqlite_schema
from worker.storage.sqlite.store import SqliteStore

REPO = Path(__file__).resolve().parents[3]
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    """A settable clock, so session activity times are deterministic."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 1.0) -> None:
        self.now += timedelta(seconds=seconds)


def obs(
    title: str | None = "Title",
    narrative: str | None = "Narrative",
    *,
    session: str = "s1",
    project: str = "p1",
    facts: Sequence[str] = (),
    at: datetime = T0,
    **fields: Any,
) -> ObservationRow:
    defaults: dict[str, Any] = {
        "type": "discovery",
        "subtitle": None,
        "concepts": [],
        "files_read": [],
        "files_modified": [],
        "prompt_number": 1,
        "content_hash": compute_observation_content_hash(session, title, narrative, facts),
    }
    return ObservationRow(
        memory_session_id=session,
        project=project,
        title=title,
        narrative=narrative,
        facts=list(facts),
        created_at=at,
        **{**defaults, **fields},
    )


def summary(
    request: str = "Do it", *, session: str = "s1", project: str = "p1", at: datetime = T0
) -> SummaryRow:
    return SummaryRow(
        memory_session_id=session,
        project=project,
        request=request,
        investigated="looked",
        learned=None,
        completed="done",
        next_steps=None,
        notes="n",
        prompt_number=2,
        created_at=at,
    )


def batch(
    *,
    session: str = "s1",
    project: str = "p1",
    fence: int = 1,
    event_ids: Sequence[str] = (),
    **kw: Any,
) -> BatchWrite:
    return BatchWrite(
        memory_session_id=session,
        project=project,
        fence=fence,
        event_ids=list(event_ids),
        **kw,
    )


@pytest.fixture(name="clock")
def _fix_clock() -> Clock:
    return Clock()


@pytest.fixture(name="db_path")
def _fix_db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "memq.db"


@pytest.fixture(name="store")
def _fix_store(backend: Backend, clock: Clock) -> Store:
    return backend.open(clock)


@pytest.fixture(name="sqlite_store")
async def _fix_sqlite_store(db_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(db_path)
    yield store
    await store.aclose()


async def _query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    async with aiosqlite.connect(path) as conn:
        return [tuple(row) for row in await conn.execute_fetchall(sql)]


async def test_migrate_twice_is_a_no_op(store: Store, backend: Backend) -> None:
    await store.migrate()
    schema = await backend.schema()
    await store.write_batch(batch(observations=[obs()]))
    await store.migrate()
    await backend.open().migrate()
    assert await backend.schema() == schema
    assert await backend.stored_schema_version() == backend.schema_version
    assert (await store.counts()).observations == 1


async def test_sqlite_runs_in_wal_mode(sqlite_store: SqliteStore, db_path: Path) -> None:
    await sqlite_store.migrate()
    assert await _query(db_path, "PRAGMA journal_mode") == [("wal",)]


async def test_newer_schema_version_is_refused_with_an_upgrade_hint(backend: Backend) -> None:
    await backend.open().migrate()
    await backend.set_schema_version(backend.schema_version + 1)
    newer = backend.open()
    with pytest.raises(StoreError, match="upgrade memq") as info:
        await newer.migrate()
    assert backend.where in str(info.value)
    assert "\n" not in str(info.value)


async def test_every_record_kind_round_trips(store: Store, backend: Backend) -> None:
    observation = obs(
        "Fixed the parser",
        "It now keeps fenced XML.",
        facts=["fact one", "fact two"],
        type="bugfix",
        subtitle="parser",
        concepts=["how-it-works", "gotcha"],
        files_read=["a.py"],
        files_modified=["b.py", "c.py"],
        prompt_number=3,
        model="small-model",
        type_fallback=True,
        source_event_ids=["e1", "e2"],
        at=T0 + timedelta(seconds=1),
    )
    prompt = PromptRow(
        memory_session_id="s1",
        project="p1",
        prompt_number=3,
        prompt_text="fix the parser",
        created_at=T0,
        event_id="e0",
    )
    dropped = DroppedOutput(
        memory_session_id="s1",
        project="p1",
        category="prose",
        raw="I cannot help",
        event_ids=["e1"],
        created_at=T0,
        reason="no xml",
        turn_kind="summary",
    )
    usage = TokenUsage(
        memory_session_id="s1",
        project="p1",
        provider="openai",
        model="small-model",
        input_tokens=100,
        cached_input_tokens=40,
        output_tokens=7,
        created_at=T0,
    )
    result = await store.write_batch(
        batch(
            event_ids=["e0", "e1", "e2"],
            prompts=[prompt, prompt],
            observations=[observation],
            summaries=[summary(at=T0 + timedelta(seconds=2))],
            dropped=[dropped],
            usage=[usage],
            ended=True,
        )
    )
    expected_observation = StoredRow(
        kind="observation",
        id=1,
        memory_session_id="s1",
        project="p1",
        created_at="2024-05-01T12:00:01.000Z",
        prompt_number=3,
        type="bugfix",
        title="Fixed the parser",
        subtitle="parser",
        facts=["fact one", "fact two"],
        narrative="It now keeps fenced XML.",
        concepts=["how-it-works", "gotcha"],
        files_read=["a.py"],
        files_modified=["b.py", "c.py"],
    )
    expected_summary = StoredRow(
        kind="summary",
        id=1,
        memory_session_id="s1",
        project="p1",
        created_at="2024-05-01T12:00:02.000Z",
        prompt_number=2,
        request="Do it",
        investigated="looked",
        completed="done",
        notes="n",
    )
    assert result.stored == [expected_observation, expected_summary]
    assert result.deduplicated == 0
    assert await store.observations() == [expected_summary, expected_observation]
    assert await store.sessions() == [
        SessionRow(
            memory_session_id="s1",
            project="p1",
            started_at="2024-05-01T12:00:00.000Z",
            last_activity_at="2024-05-01T12:00:00.000Z",
            ended_at="2024-05-01T12:00:00.000Z",
            prompts=1,
            observations=1,
            summaries=1,
        )
    ]
    assert await store.dropped() == [
        DroppedRow(
            id=1,
            memory_session_id="s1",
            project="p1",
            category="prose",
            raw="I cannot help",
            event_ids=["e1"],
            created_at="2024-05-01T12:00:00.000Z",
            reason="no xml",
            turn_kind="summary",
            replayed_at=None,
        )
    ]
    counts = await store.counts()
    assert (counts.sessions, counts.prompts, counts.dropped_outputs) == (1, 1, 1)
    assert (counts.input_tokens, counts.cached_input_tokens, counts.output_tokens) == (100, 40, 7)
    assert await backend.query(
        "SELECT prompt_number, prompt_text, event_id, created_at FROM user_prompts"
    ) == [(3, "fix the parser", "e0", "2024-05-01T12:00:00.000Z")]
    ((model, fallback, sources, content_hash, epoch_ms, announced),) = await backend.query(
        "SELECT model, type_fallback, source_event_ids, content_hash, created_at_epoch_ms,"
        " announced_at FROM observations"
    )
    assert (model, bool(fallback), json.loads(sources)) == ("small-model", True, ["e1", "e2"])
    assert (content_hash, announced) == (observation.content_hash, None)
    assert epoch_ms == int((T0 + timedelta(seconds=1)).timestamp() * 1000)
    assert await backend.query("SELECT prompt_counter FROM sessions") == [(3,)]


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC), "2024-05-01T12:00:00.123Z"),
        (
            datetime(2024, 5, 1, 14, 30, 0, 999999, tzinfo=timezone(timedelta(hours=2))),
            "2024-05-01T12:30:00.999Z",
        ),
        (datetime(2024, 5, 1, 12, 0, 0), "2024-05-01T12:00:00.000Z"),
    ],
)
async def test_timestamps_are_stored_as_utc_iso_with_milliseconds(
    store: Store, at: datetime, expected: str
) -> None:
    result = await store.write_batch(batch(observations=[obs(at=at)]))
    assert result.stored[0].created_at == expected
    assert (await store.observations())[0].created_at == expected


async def test_same_hash_twice_in_one_batch_is_one_row(store: Store) -> None:
    result = await store.write_batch(
        batch(observations=[obs("A", "x"), obs("A", "x", subtitle="other"), obs("B", "y")])
    )
    assert [(r.title, r.subtitle) for r in result.stored] == [("A", None), ("B", None)]
    assert result.deduplicated == 1
    assert (await store.counts()).observations == 2


async def test_same_hash_across_batches_returns_only_the_new_row(store: Store) -> None:
    first = await store.write_batch(batch(observations=[obs("A", "x")]))
    second = await store.write_batch(batch(observations=[obs("A", "x"), obs("C", "z")]))
    assert [r.title for r in first.stored] == ["A"]
    assert [r.title for r in second.stored] == ["C"]
    assert second.deduplicated == 1
    assert [r.title for r in await store.observations()] == ["C", "A"]


async def test_same_hash_in_another_session_is_a_separate_row(store: Store) -> None:
    shared = "0123456789abcdef"
    await store.write_batch(
        batch(session="s1", observations=[obs(session="s1", content_hash=shared)])
    )
    result = await store.write_batch(
        batch(session="s2", observations=[obs(session="s2", content_hash=shared)])
    )
    assert len(result.stored) == 1
    assert (await store.counts()).observations == 2


@pytest.mark.parametrize(
    ("facts_a", "facts_b", "rows"),
    [
        (["ran the tests"], ["edited the parser"], 2),
        (["ran the tests"], ["ran  the   tests"], 1),
        (["a", "b"], ["b", "a"], 2),
    ],
)
async def test_facts_only_observations_dedupe_on_their_facts(
    store: Store, facts_a: list[str], facts_b: list[str], rows: int
) -> None:
    result = await store.write_batch(
        batch(observations=[obs(None, None, facts=facts_a), obs(None, None, facts=facts_b)])
    )
    assert len(result.stored) == rows
    assert result.deduplicated == 2 - rows
    assert (await store.counts()).observations == rows


@pytest.mark.parametrize("next_fence", [5, 6])
async def test_stale_fence_is_refused_and_stores_nothing(store: Store, next_fence: int) -> None:
    await store.write_batch(batch(fence=5, event_ids=["e1"], observations=[obs("A", "x")]))
    stale = batch(
        fence=3,
        event_ids=["e2"],
        observations=[obs("B", "y")],
        summaries=[summary()],
        dropped=[
            DroppedOutput(
                memory_session_id="s1",
                project="p1",
                category="prose",
                raw="r",
                event_ids=["e2"],
                created_at=T0,
            )
        ],
        ended=True,
    )
    with pytest.raises(LeaseLostError) as info:
        await store.write_batch(stale)
    message = str(info.value)
    assert "s1" in message
    assert "3" in message
    assert "5" in message
    assert "\n" not in message
    counts = await store.counts()
    assert (counts.observations, counts.summaries, counts.dropped_outputs) == (1, 0, 0)
    assert await store.processed_event_ids("s1", ["e1", "e2"]) == {"e1"}
    assert (await store.sessions())[0].ended_at is None
    result = await store.write_batch(batch(fence=next_fence, observations=[obs("B", "y")]))
    assert [r.title for r in result.stored] == ["B"]


async def test_fence_raised_by_a_new_holder_refuses_the_old_one(store: Store) -> None:
    await store.write_batch(batch(fence=1))
    await store.write_batch(batch(fence=2))
    with pytest.raises(LeaseLostError):
        await store.write_batch(batch(fence=1))


async def test_processed_event_ids_are_per_session(store: Store) -> None:
    await store.write_batch(batch(session="s1", event_ids=["e1", "e2"]))
    await store.write_batch(batch(session="s1", event_ids=["e2", "e3"]))
    await store.write_batch(batch(session="s2", event_ids=["e9"]))
    assert await store.processed_event_ids("s1", ["e1", "e3", "e4", "e9"]) == {"e1", "e3"}
    assert await store.processed_event_ids("s2", ["e1", "e9"]) == {"e9"}
    assert await store.processed_event_ids("s3", ["e1"]) == set()
    assert await store.processed_event_ids("s1", []) == set()


async def test_rows_stay_unannounced_until_marked(store: Store) -> None:
    first = await store.write_batch(
        batch(
            observations=[obs("late", "x", at=T0 + timedelta(seconds=5)), obs("early", "y")],
            summaries=[summary(at=T0 + timedelta(seconds=2))],
        )
    )
    pending = await store.unannounced()
    assert [(r.kind, r.title or r.request) for r in pending] == [
        ("observation", "early"),
        ("summary", "Do it"),
        ("observation", "late"),
    ]
    assert await store.unannounced(limit=1) == pending[:1]
    await store.mark_announced(pending[:2])
    assert await store.unannounced() == pending[2:]
    await store.write_batch(batch(observations=[obs("again", "z")]))
    assert [r.title for r in await store.unannounced()] == ["again", "late"]
    await store.mark_announced([*first.stored, *(await store.unannounced())])
    assert await store.unannounced() == []
    assert len(await store.observations()) == 4


async def test_unannounced_rows_of_one_session(store: Store) -> None:
    await store.write_batch(batch(observations=[obs("mine", "x")], summaries=[summary()]))
    await store.write_batch(batch(session="s2", observations=[obs("theirs", "y", session="s2")]))
    mine = await store.unannounced(memory_session_id="s1")
    assert [(r.kind, r.memory_session_id) for r in mine] == [
        ("observation", "s1"),
        ("summary", "s1"),
    ]
    assert await store.unannounced(1, memory_session_id="s1") == mine[:1]
    assert [r.title for r in await store.unannounced(memory_session_id="s2")] == ["theirs"]
    assert await store.unannounced(memory_session_id="nobody") == []


async def _listing_fixture(store: Store) -> None:
    at = [T0 + timedelta(seconds=i) for i in range(6)]
    await store.write_batch(
        batch(
            session="s1",
            project="alpha",
            observations=[
                obs("a1", "x", session="s1", project="alpha", at=at[0]),
                obs("a3", "x", session="s1", project="alpha", at=at[3]),
            ],
            summaries=[summary("a-sum", session="s1", project="alpha", at=at[4])],
        )
    )
    await store.write_batch(
        batch(
            session="s2",
            project="beta",
            observations=[obs("b2", "x", session="s2", project="beta", at=at[2])],
        )
    )
    await store.write_batch(
        batch(
            session="s3",
            project="alpha",
            observations=[obs("c5", "x", session="s3", project="alpha", at=at[5])],
            summaries=[summary("c-sum", session="s3", project="alpha", at=at[1])],
        )
    )


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["c5", "a-sum", "a3", "b2", "c-sum", "a1"]),
        ({"limit": 3}, ["c5", "a-sum", "a3"]),
        ({"project": "alpha"}, ["c5", "a-sum", "a3", "c-sum", "a1"]),
        ({"memory_session_id": "s1"}, ["a-sum", "a3", "a1"]),
        ({"memory_session_id": "s3", "project": "alpha"}, ["c5", "c-sum"]),
        ({"memory_session_id": "s3", "project": "beta"}, []),
        ({"project": "gamma"}, []),
    ],
)
async def test_observations_lists_newest_first_with_filters(
    store: Store, filters: dict[str, Any], expected: list[str]
) -> None:
    await _listing_fixture(store)
    found = await store.observations(**filters)
    assert [r.title or r.request for r in found] == expected


async def test_observations_with_equal_times_order_by_id(store: Store) -> None:
    await store.write_batch(batch(observations=[obs("one", "x"), obs("two", "y")]))
    await store.write_batch(batch(observations=[obs("three", "z")]))
    assert [r.title for r in await store.observations()] == ["three", "two", "one"]


async def test_sessions_list_newest_activity_first_with_counts(store: Store, clock: Clock) -> None:
    prompt = PromptRow(
        memory_session_id="s1",
        project="alpha",
        prompt_number=1,
        prompt_text="go",
        created_at=T0,
        event_id="p1",
    )
    await store.write_batch(
        batch(session="s1", project="alpha", prompts=[prompt], observations=[obs(session="s1")])
    )
    clock.advance()
    await store.write_batch(batch(session="s2", project="beta", summaries=[summary(session="s2")]))
    clock.advance()
    await store.write_batch(batch(session="s1", project="alpha", ended=True))
    sessions = await store.sessions()
    assert [(s.memory_session_id, s.prompts, s.observations, s.summaries) for s in sessions] == [
        ("s1", 1, 1, 0),
        ("s2", 0, 0, 1),
    ]
    assert sessions[0].started_at == "2024-05-01T12:00:00.000Z"
    assert sessions[0].last_activity_at == "2024-05-01T12:00:02.000Z"
    assert sessions[0].ended_at == "2024-05-01T12:00:02.000Z"
    assert sessions[1].ended_at is None
    assert [s.memory_session_id for s in await store.sessions(project="beta")] == ["s2"]
    assert [s.memory_session_id for s in await store.sessions(limit=1)] == ["s1"]


def _dropped(raw: str, seconds: int) -> DroppedOutput:
    return DroppedOutput(
        memory_session_id="s1",
        project="p1",
        category="prose",
        raw=raw,
        event_ids=[f"e-{raw}"],
        created_at=T0 + timedelta(seconds=seconds),
    )


async def test_dropped_outputs_list_newest_first_and_hide_replayed(
    store: Store, clock: Clock
) -> None:
    await store.write_batch(batch(dropped=[_dropped("old", 0), _dropped("new", 1)]))
    listed = await store.dropped()
    assert [(d.raw, d.event_ids, d.turn_kind) for d in listed] == [
        ("new", ["e-new"], "observation"),
        ("old", ["e-old"], "observation"),
    ]
    clock.advance(60)
    await store.mark_dropped_replayed(listed[1].id)
    assert [d.raw for d in await store.dropped()] == ["new"]
    everything = await store.dropped(include_replayed=True)
    assert [(d.raw, d.replayed_at) for d in everything] == [
        ("new", None),
        ("old", "2024-05-01T12:01:00.000Z"),
    ]
    assert [d.raw for d in await store.dropped(limit=1, include_replayed=True)] == ["new"]


async def test_replaying_an_unknown_dropped_id_is_a_store_error(store: Store) -> None:
    await store.migrate()
    with pytest.raises(StoreError, match="no dropped output with id 42"):
        await store.mark_dropped_replayed(42)


async def test_counts_sum_tokens_across_batches(store: Store) -> None:
    def usage(session: str, n: int) -> TokenUsage:
        return TokenUsage(
            memory_session_id=session,
            project="p1",
            provider="anthropic",
            model="m",
            input_tokens=n,
            cached_input_tokens=n // 2,
            output_tokens=n // 10,
            created_at=T0,
        )

    empty = await store.counts()
    assert (empty.sessions, empty.observations, empty.input_tokens) == (0, 0, 0)
    await store.write_batch(batch(session="s1", usage=[usage("s1", 100), usage("s1", 20)]))
    await store.write_batch(batch(session="s2", usage=[usage("s2", 1000)]))
    counts = await store.counts()
    assert counts.sessions == 2
    assert (counts.input_tokens, counts.cached_input_tokens, counts.output_tokens) == (
        1120,
        560,
        112,
    )


async def test_a_record_of_another_session_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="holds a record of session s2"):
        await store.write_batch(batch(session="s1", observations=[obs(session="s2")]))
    assert (await store.counts()).sessions == 0


async def test_two_stores_on_one_database_write_concurrently(backend: Backend) -> None:
    stores = [backend.open(), backend.open()]

    def write(store: Store, name: str, i: int) -> Any:
        session = f"s{i % 3}"
        return store.write_batch(
            batch(
                session=session,
                event_ids=[f"{name}-{i}"],
                observations=[
                    obs(f"{name}-{i}-{k}", "x", session=session, prompt_number=i) for k in range(2)
                ],
            )
        )

    try:
        results = await asyncio.gather(
            *(
                write(store, name, i)
                for i in range(30)
                for store, name in zip(stores, "ab", strict=True)
            )
        )
        assert sum(len(r.stored) for r in results) == 120
        assert (await stores[0].counts()).observations == 120
        assert (await stores[1].counts()).sessions == 3
    finally:
        await backend.aclose()


async def test_stores_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    # Switching a new file to WAL from several connections at once used to fail with
    # "database is locked" now and then; 30 fresh files make a regression very likely to show.
    for attempt in range(30):
        path = tmp_path / str(attempt) / "memq.db"
        stores = [SqliteStore(path) for _ in range(4)]
        try:
            await asyncio.gather(*(store.ping() for store in stores))
        finally:
            for store in stores:
                await store.aclose()
        async with aiosqlite.connect(path) as conn:
            modes = await conn.execute_fetchall("PRAGMA journal_mode")
            versions = await conn.execute_fetchall("PRAGMA user_version")
        assert [tuple(m) for m in modes] == [("wal",)]
        assert [tuple(v) for v in versions] == [(sqlite_schema.SCHEMA_VERSION,)]


async def test_a_write_cancelled_while_waiting_for_the_lock_leaves_no_transaction(
    sqlite_store: SqliteStore, db_path: Path
) -> None:
    store = sqlite_store
    await store.migrate()
    async with aiosqlite.connect(db_path, isolation_level=None) as other:
        await other.execute("BEGIN IMMEDIATE")
        task = asyncio.create_task(store.write_batch(batch(observations=[obs("A", "x")])))
        # Give the write time to reach SQLite's busy wait; any earlier cancel must be safe too.
        await asyncio.sleep(0.1)
        task.cancel()
        await other.execute("COMMIT")
        with pytest.raises(asyncio.CancelledError):
            await task
    result = await store.write_batch(batch(observations=[obs("B", "y")]))
    assert [r.title for r in result.stored] == ["B"]
    assert [r.title for r in await store.observations()] == ["B"]


_WRITER = """
import asyncio, sys
from datetime import UTC, datetime
from pathlib import Path
from worker.storage.records import BatchWrite, ObservationRow
from worker.storage.sqlite.store import SqliteStore

async def main(path: str, name: str, n: int) -> None:
    store = SqliteStore(Path(path))
    try:
        for i in range(n):
            session = f"s{i % 4}"
            observations = [
                ObservationRow(memory_session_id=session, project="p", type="change",
                    title=f"{name}-{i}", subtitle=None, facts=[], narrative="x", concepts=[],
                    files_read=[], files_modified=[], prompt_number=None,
                    content_hash=f"{name}-{i}", created_at=datetime.now(UTC))
            ]
            await store.write_batch(BatchWrite(memory_session_id=session, project="p", fence=1,
                event_ids=[f"{name}-{i}"], observations=observations))
    finally:
        await store.aclose()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


_PER_PROCESS = 100


async def test_two_processes_write_one_file_concurrently(db_path: Path) -> None:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _WRITER,
            str(db_path),
            name,
            str(_PER_PROCESS),
            cwd=REPO,
            stderr=asyncio.subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    outcomes = [await proc.communicate() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in outcomes]
    store = SqliteStore(db_path)
    try:
        assert (await store.counts()).observations == 2 * _PER_PROCESS
        for name in ("a", "b"):
            ids = [f"{name}-{i}" for i in range(_PER_PROCESS)]
            found = set()
            for session in ("s0", "s1", "s2", "s3"):
                found |= await store.processed_event_ids(session, ids)
            assert found == set(ids)
    finally:
        await store.aclose()


@pytest.fixture(name="corrupt_db")
def _fix_corrupt_db(db_path: Path) -> Path:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"this is not a database, only garbage bytes\n" * 200)
    return db_path


@pytest.mark.parametrize("operation", ["migrate", "ping", "counts"])
async def test_a_corrupt_file_is_a_one_line_store_error(corrupt_db: Path, operation: str) -> None:
    db_path = corrupt_db
    store = SqliteStore(db_path)
    with pytest.raises(StoreError) as info:
        await getattr(store, operation)()
    message = str(info.value)
    assert str(db_path) in message
    assert "\n" not in message
    await store.aclose()


async def test_a_data_dir_that_cannot_be_created_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the data dir should be")
    store = SqliteStore(blocker / "data" / "memq.db")
    with pytest.raises(StoreError) as info:
        await store.ping()
    assert str(blocker / "data") in str(info.value)
    assert "\n" not in str(info.value)


async def test_the_data_dir_is_created_when_missing(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "memq.db"
    store = SqliteStore(path)
    await store.ping()
    await store.aclose()
    assert path.is_file()


@pytest.mark.parametrize(
    ("database_url", "expected"),
    [
        (None, "{data}/memq.db"),
        ("", "{data}/memq.db"),
        ("sqlite://{tmp}/elsewhere/x.db", "{tmp}/elsewhere/x.db"),
        ("sqlite:///{tmp}/elsewhere/x.db", "{tmp}/elsewhere/x.db"),
        ("sqlite://{tmp}/with%20space.db", "{tmp}/with space.db"),
    ],
)
def test_open_store_picks_the_sqlite_file(
    tmp_path: Path, database_url: str | None, expected: str
) -> None:
    data = tmp_path / "data"
    url = None if database_url is None else database_url.format(tmp=tmp_path)
    store = open_store(Settings(data_dir=str(data), database_url=url))
    assert isinstance(store, SqliteStore)
    assert store.path == Path(expected.format(data=data, tmp=tmp_path))


@pytest.mark.parametrize(("chroma", "queued"), [("off", 0), ("on", 2), ("http://127.0.0.1:9/", 2)])
async def test_open_store_queues_rows_for_the_vector_index_only_while_it_is_on(
    tmp_path: Path, chroma: str, queued: int
) -> None:
    store = open_store(Settings(data_dir=str(tmp_path / "data"), chroma=chroma))
    try:
        await store.write_batch(batch(observations=[obs("A", "x")], summaries=[summary()]))
        assert await store.vector_lag() == queued
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    "database_url",
    [
        "postgresql://memq:secret@db.example:6543/memq",
        "postgres://memq:secret@db.example:6543/memq",
    ],
)
def test_open_store_picks_postgres_and_names_it_without_credentials(database_url: str) -> None:
    store = open_store(Settings(database_url=database_url))
    assert isinstance(store, PostgresStore)
    assert store.where == "db.example:6543/memq"


@pytest.mark.parametrize(
    ("database_url", "message"),
    [
        ("postgresql://memq:secret@db:port/memq", "not a valid postgresql:// URL"),
        ("mysql://memq:secret@db/memq", "scheme 'mysql' is not supported"),
        ("/plain/path.db", "is not supported"),
        ("sqlite://relative.db", "absolute file"),
        ("sqlite:///", "absolute file"),
        ("sqlite:", "absolute file"),
    ],
)
def test_open_store_refuses_other_urls_without_echoing_them(
    database_url: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        open_store(Settings(database_url=database_url))
    assert "secret" not in str(info.value)


async def test_prune_processed_forgets_only_old_event_ids(
    store: Store, clock: Clock, backend: Backend
) -> None:
    await store.write_batch(batch(session="s1", event_ids=["old1", "old2"]))
    await store.write_batch(batch(session="s2", event_ids=["old3"]))
    # Imported rows carry their original (old) times; a re-run of the import relies on them.
    await store.write_batch(batch(session="s2", event_ids=["claude-mem:observation:7"]))
    cutoff = T0 + timedelta(days=7)
    clock.now = cutoff
    await store.write_batch(batch(session="s1", event_ids=["at-cutoff"]))
    clock.advance(3600)
    await store.write_batch(batch(session="s1", event_ids=["new1"]))
    await store.write_batch(batch(session="s2", event_ids=["new2"]))

    assert await store.prune_processed(cutoff) == 3

    s1 = ["old1", "old2", "at-cutoff", "new1"]
    assert await store.processed_event_ids("s1", s1) == {"at-cutoff", "new1"}
    assert await store.processed_event_ids("s2", ["old3", "new2", "claude-mem:observation:7"]) == {
        "new2",
        "claude-mem:observation:7",
    }
    left = await backend.query("SELECT event_id FROM processed_events ORDER BY event_id")
    assert [row[0] for row in left] == ["at-cutoff", "claude-mem:observation:7", "new1", "new2"]
    assert await store.prune_processed(cutoff) == 0
    # Pruning touches nothing but the replay guard.
    assert (await store.counts()).sessions == 2


async def test_prune_processed_deletes_a_backlog_in_chunks(
    store: Store, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("worker.storage.sql.maintenance.PRUNE_CHUNK_ROWS", 2)
    old = [f"old{i}" for i in range(5)]
    await store.write_batch(batch(event_ids=old))
    clock.advance(86_400)
    await store.write_batch(batch(event_ids=["new"]))
    assert await store.prune_processed(T0 + timedelta(hours=1)) == 5
    assert await store.processed_event_ids("s1", [*old, "new"]) == {"new"}


async def test_sqlite_prunes_through_the_processed_at_index(
    sqlite_store: SqliteStore, db_path: Path
) -> None:
    await sqlite_store.migrate()
    plan = await _query(
        db_path,
        "EXPLAIN QUERY PLAN SELECT memory_session_id, event_id FROM processed_events"
        " WHERE processed_at < '2024-01-01T00:00:00.000Z' AND event_id NOT LIKE 'x%' LIMIT 9",
    )
    assert any("processed_events_processed_at" in str(row[-1]) for row in plan), plan


@pytest.fixture(name="fresh_backend", params=BACKENDS)
async def _fix_fresh_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    """A database of each backend with no schema at all (PostgreSQL: a new database)."""
    if request.param == "sqlite":
        backend = Backend("sqlite", path=tmp_path / "memq.db")
        yield backend
        await backend.aclose()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = await server.create_database()
    backend = Backend("postgres", url=url)
    try:
        yield backend
    finally:
        await backend.aclose()
        await server.drop_database(url)


async def _migrate_all_but_the_last_step(backend: Backend) -> None:
    """Create the schema an older memq (one migration step behind) left."""
    if backend.path is not None:
        async with aiosqlite.connect(backend.path, isolation_level=None) as conn:
            for statement in itertools.chain(*sqlite_schema.MIGRATIONS[:-1]):
                await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version = {sqlite_schema.SCHEMA_VERSION - 1:d}")
        return
    conn = await asyncpg.connect(backend.url)
    try:
        async with conn.transaction():
            for statement in itertools.chain(*postgres_schema.MIGRATIONS[:-1]):
                await conn.execute(statement)
            await conn.execute(
                "CREATE TABLE memq_schema_version (version INTEGER PRIMARY KEY,"
                " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            await conn.executemany(
                "INSERT INTO memq_schema_version VALUES ($1)",
                [(v,) for v in range(1, postgres_schema.SCHEMA_VERSION)],
            )
    finally:
        await conn.close()


async def test_a_database_of_the_previous_schema_gains_file_hashes_and_keeps_its_rows(
    fresh_backend: Backend,
) -> None:
    await _migrate_all_but_the_last_step(fresh_backend)
    await fresh_backend.execute("INSERT INTO sessions VALUES ('s1', 'p1', 1, 'x', 'x', NULL, 0)")
    await fresh_backend.execute(
        "INSERT INTO processed_events VALUES ('s1', 'e1', '2024-01-01T00:00:00.000Z')"
    )
    await fresh_backend.execute(
        "INSERT INTO observations (memory_session_id, project, type, title, files_read,"
        " content_hash, created_at, created_at_epoch_ms)"
        " VALUES ('s1', 'p1', 'change', 'old row', '[\"a.py\"]', 'h1', 'x', 1)"
    )
    store = fresh_backend.open()
    await store.migrate()
    assert await fresh_backend.stored_schema_version() == fresh_backend.schema_version
    assert await store.processed_event_ids("s1", ["e1"]) == {"e1"}
    [old] = await store.observations(project="p1")
    assert (old.title, old.files_read, old.file_hashes) == ("old row", ["a.py"], None)
    hashes: dict[str, str | None] = {"a.py": "ab" * 32, "big.bin": None}
    result = await store.write_batch(
        batch(fence=2, observations=[obs("new row", files_read=["a.py"], file_hashes=hashes)])
    )
    [new] = await store.rows_by_keys([("observation", result.stored[0].id)])
    assert new.file_hashes == hashes


def _prompt(n: int, text: str, *, session: str = "s1") -> PromptRow:
    return PromptRow(
        memory_session_id=session,
        project="p1",
        prompt_number=n,
        prompt_text=text,
        created_at=T0 + timedelta(seconds=len(text)),
        event_id=f"{session}-{text}",
    )


async def test_latest_prompt_is_the_session_s_last_stored_request(store: Store) -> None:
    assert await store.latest_prompt("s1") is None
    await store.write_batch(batch(prompts=[_prompt(1, "fix the parser")]))
    await store.write_batch(batch(prompts=[_prompt(2, "now the tests")], event_ids=["e1"]))
    await store.write_batch(batch(session="s2", prompts=[_prompt(7, "elsewhere", session="s2")]))
    latest = await store.latest_prompt("s1")
    assert latest is not None
    assert (latest.prompt_number, latest.prompt_text) == (2, "now the tests")
    assert latest.created_at == T0 + timedelta(seconds=len("now the tests"))
    assert await store.latest_prompt("s3") is None


async def test_latest_prompt_published_without_a_number_is_numbered_by_position(
    store: Store,
) -> None:
    # Stored as 0 (the Claude Code hook numbers no prompt); a conversation needs a number.
    for text in ("one", "two", "three"):
        await store.write_batch(batch(prompts=[_prompt(0, text)]))
    latest = await store.latest_prompt("s1")
    assert latest is not None
    assert (latest.prompt_number, latest.prompt_text) == (3, "three")
