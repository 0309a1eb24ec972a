"""What only PostgreSQL has to prove: one migration among many workers, row locks, errors."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from tests.support import postgres_server as postgres_server_module
from tests.support.ports import free_port
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.search_corpus import load_corpus, store_corpus, top3_hits
from tests.support.store_backends import Backend, backend_fixture  # noqa: F401
from worker.errors import LeaseLostError
from worker.search.hybrid import SearchResult, search
from worker.storage.outage import Reachability
from worker.storage.postgres.schema import SCHEMA_VERSION
from worker.storage.postgres.store import PostgresStore
from worker.storage.postgres.text_search import tsquery_text
from worker.storage.protocol import Store, StoreError, StoreUnavailableError
from worker.storage.records import BatchWrite, ObservationRow
from worker.storage.sqlite.store import SqliteStore

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def batch(session: str, fence: int, *titles: str) -> BatchWrite:
    observations = [
        ObservationRow(
            memory_session_id=session, project="p", type="change", title=title, subtitle=None,
            facts=[], narrative="x", concepts=[], files_read=[], files_modified=[],
            prompt_number=None, content_hash=f"{session}-{title}", created_at=T0,
        )
        for title in titles
    ]  # fmt: skip
    return BatchWrite(
        memory_session_id=session,
        project="p",
        fence=fence,
        event_ids=[f"{session}-{fence}"],
        observations=observations,
    )


@pytest.fixture(name="pg_url")
async def _fix_pg_url(postgres_server: PostgresServer) -> str:
    return await postgres_server.emptied_database()


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        ('"login" "test"', "'login' & 'test'"),
        ('"session cookie" "expired"', "'session cookie' & 'expired'"),
        ('"migrat"*', "'migrat':*"),
        ('"it\'s"', "'it''s'"),
        ('"back\\slash"', "'back\\\\slash'"),
        ('"NOT" "a|b" "!x"', "'NOT' & 'a|b' & '!x'"),
        ('"" "   " "word"', "'word'"),
    ],
)
def test_match_expressions_become_tsquery_text_of_quoted_operands(
    match: str, expected: str
) -> None:
    assert tsquery_text(match) == expected


async def test_workers_migrating_a_new_database_at_once_migrate_it_once(
    postgres_server: PostgresServer,
) -> None:
    url = await postgres_server.create_database()
    stores = [PostgresStore(url) for _ in range(6)]
    try:
        await asyncio.gather(*(store.ping() for store in stores))
        await stores[0].write_batch(batch("s1", 1, "A"))
        assert (await stores[5].counts()).observations == 1
        conn = await asyncpg.connect(url)
        try:
            versions = [r[0] for r in await conn.fetch("SELECT version FROM memq_schema_version")]
        finally:
            await conn.close()
        assert versions == list(range(1, SCHEMA_VERSION + 1))
    finally:
        for store in stores:
            await store.aclose()
        await postgres_server.drop_database(url)


async def test_first_batches_racing_for_a_new_session_keep_the_highest_fence(
    backend: Backend,
) -> None:
    stores = [backend.open(), backend.open()]

    async def write(session: str, fence: int) -> int | None:
        """None when stored, else the stored fence the refusal names."""
        try:
            await stores[fence - 1].write_batch(batch(session, fence, f"from-{fence}"))
        except LeaseLostError as e:
            return e.stored_fence
        return None

    outcomes = []
    for i in range(15):
        session = f"race-{i}"
        outcomes.append(await asyncio.gather(write(session, 1), write(session, 2)))
        assert await stores[0].session_fence(session) == 2
    # The higher fence always lands; the lower one either landed first or names fence 2.
    assert all(low in (None, 2) and high is None for low, high in outcomes)


async def test_a_write_behind_a_newer_holders_transaction_is_refused_when_it_commits(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url)
    await store.write_batch(batch("s1", 5, "A"))
    other = await asyncpg.connect(pg_url)
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT fence FROM sessions WHERE memory_session_id = 's1' FOR UPDATE")
        write = asyncio.create_task(store.write_batch(batch("s1", 5, "B")))
        await asyncio.sleep(0.2)
        assert not write.done()  # waits on the session row
        await other.execute("UPDATE sessions SET fence = 6 WHERE memory_session_id = 's1'")
        await tx.commit()
        with pytest.raises(LeaseLostError) as info:
            await write
        assert info.value.stored_fence == 6
    finally:
        await other.close()
    assert [r.title for r in await store.observations()] == ["A"]
    await store.aclose()


async def test_a_write_cancelled_while_waiting_for_the_row_lock_leaves_nothing(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    await store.write_batch(batch("s1", 1, "A"))
    other = await asyncpg.connect(pg_url)
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT fence FROM sessions WHERE memory_session_id = 's1' FOR UPDATE")
        write = asyncio.create_task(store.write_batch(batch("s1", 1, "B")))
        await asyncio.sleep(0.2)
        write.cancel()
        with pytest.raises(asyncio.CancelledError):
            await write
        await tx.rollback()
    finally:
        await other.close()
    result = await store.write_batch(batch("s1", 1, "C"))
    assert [r.title for r in result.stored] == ["C"]
    assert [r.title for r in await store.observations()] == ["C", "A"]
    await store.aclose()


@pytest.mark.parametrize("operation", ["ping", "migrate", "counts"])
async def test_an_unreachable_server_is_a_one_line_error_without_the_password(
    operation: str,
) -> None:
    port = free_port()
    store = PostgresStore(f"postgresql://memq:s3cret@127.0.0.1:{port}/memq")
    with pytest.raises(StoreError) as info:
        await getattr(store, operation)()
    message = str(info.value)
    assert f"127.0.0.1:{port}/memq" in message
    assert "s3cret" not in message
    assert "\n" not in message
    await store.aclose()


async def test_a_missing_database_is_a_store_error_naming_it(
    postgres_server: PostgresServer,
) -> None:
    store = PostgresStore(postgres_server.url("no_such_db"))
    with pytest.raises(StoreError, match="no_such_db"):
        await store.ping()
    await store.aclose()


def test_a_missing_server_binary_fails_with_the_package_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postgres_server_module, "_bin_dir", lambda: None)
    with pytest.raises(RuntimeError, match="Debian's `postgresql` package"):
        PostgresServer()


async def test_keyword_search_answers_the_corpus_questions_as_sqlite_does(
    pg_url: str, tmp_path: Path
) -> None:
    corpus = load_corpus()
    answered: list[list[str]] = []
    for store in (SqliteStore(tmp_path / "memq.db"), PostgresStore(pg_url)):
        try:
            ids = await store_corpus(store, corpus.observations)

            async def ask(question: str, store: Store = store) -> SearchResult:
                return await search(store, question, mode="fts", limit=10)

            _, missed = await top3_hits(corpus.questions, ids, ask)
        finally:
            await store.aclose()
        answered.append([q.question for q in corpus.questions if q.question not in missed])
    sqlite_answers, postgres_answers = answered
    assert sqlite_answers  # the comparison means something only if SQLite answers some
    assert postgres_answers == sqlite_answers


async def test_a_server_that_is_not_there_is_unavailable_one_that_refuses_is_not(
    postgres_server: PostgresServer,
) -> None:
    gone = PostgresStore(f"postgresql://memq@127.0.0.1:{free_port()}/memq")
    with pytest.raises(StoreUnavailableError):
        await gone.ping()
    await gone.aclose()
    # A missing database answers with an error: waiting would not help, so it is no outage.
    missing = PostgresStore(postgres_server.url("no_such_db"))
    with pytest.raises(StoreError) as info:
        await missing.ping()
    assert not isinstance(info.value, StoreUnavailableError)
    await missing.aclose()


def test_an_outage_is_one_warning_and_one_line_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="worker.storage.outage")
    reach = Reachability("db:5432/memq")
    reach.up()  # reachable all along: nothing to say
    for n in range(3):
        reach.down(f"refused {n}")
    assert not reach.reachable
    assert reach.last_error == "refused 2"
    reach.up()
    reach.up()
    reach.down("refused again")
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in messages] == ["WARNING", "INFO", "WARNING"]
    assert messages[0][1].startswith("store unreachable: refused 0;")
    assert messages[1][1].startswith("store reachable again after ")
    assert reach.outages == 2
