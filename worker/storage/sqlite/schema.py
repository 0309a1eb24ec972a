"""The SQLite schema (ordered migrations applied in one transaction) and connection settings."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import aiosqlite

from worker.storage.protocol import StoreError


def _words(column: str) -> str:
    """SQL turning a JSON list-of-strings column into space-separated text (for FTS)."""
    return (
        f"CASE WHEN json_valid({column}) THEN"
        f" (SELECT group_concat(value, ' ') FROM json_each({column})) ELSE {column} END"
    )


# The leading columns of every table whose rows belong to one session.
_SESSION_ROW = """id INTEGER PRIMARY KEY AUTOINCREMENT,
            memory_session_id TEXT NOT NULL
                REFERENCES sessions (memory_session_id) ON DELETE CASCADE,
            project TEXT NOT NULL"""
_SUMMARY_TEXT = "rowid, request, investigated, learned, completed, next_steps, notes"
# Time indexes are ascending on purpose: with the rowid appended they serve both
# "oldest first" and, scanned backwards, "newest first, then highest id".
# Each step is a tuple of single statements: sqlite3's executescript() would COMMIT the
# surrounding transaction, so steps are executed statement by statement instead.
# Append new steps; never edit a released one. PRAGMA user_version = number of steps applied.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE sessions (
            memory_session_id TEXT PRIMARY KEY,
            project TEXT NOT NULL,
            fence INTEGER NOT NULL DEFAULT 0,
            started_at TEXT NOT NULL,
            last_activity_at TEXT NOT NULL,
            ended_at TEXT,
            prompt_counter INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX sessions_activity ON sessions (last_activity_at, memory_session_id)",
        """CREATE INDEX sessions_project_activity
            ON sessions (project, last_activity_at, memory_session_id)""",
        f"""CREATE TABLE user_prompts (
            {_SESSION_ROW},
            prompt_number INTEGER NOT NULL,
            prompt_text TEXT NOT NULL,
            created_at TEXT NOT NULL,
            event_id TEXT NOT NULL,
            UNIQUE (memory_session_id, event_id)
        )""",
        f"""CREATE TABLE observations (
            {_SESSION_ROW},
            type TEXT NOT NULL,
            title TEXT,
            subtitle TEXT,
            facts TEXT NOT NULL DEFAULT '[]',
            narrative TEXT,
            concepts TEXT NOT NULL DEFAULT '[]',
            files_read TEXT NOT NULL DEFAULT '[]',
            files_modified TEXT NOT NULL DEFAULT '[]',
            prompt_number INTEGER,
            content_hash TEXT NOT NULL,
            model TEXT,
            type_fallback INTEGER NOT NULL DEFAULT 0,
            source_event_ids TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL,
            created_at_epoch_ms INTEGER NOT NULL,
            announced_at TEXT,
            UNIQUE (memory_session_id, content_hash)
        )""",
        # The UNIQUE index above also serves lookups by session alone.
        "CREATE INDEX observations_created ON observations (created_at_epoch_ms)",
        """CREATE INDEX observations_session_created
            ON observations (memory_session_id, created_at_epoch_ms)""",
        """CREATE INDEX observations_project_created
            ON observations (project, created_at_epoch_ms)""",
        """CREATE INDEX observations_unannounced
            ON observations (created_at_epoch_ms) WHERE announced_at IS NULL""",
        f"""CREATE TABLE summaries (
            {_SESSION_ROW},
            request TEXT,
            investigated TEXT,
            learned TEXT,
            completed TEXT,
            next_steps TEXT,
            notes TEXT,
            prompt_number INTEGER,
            model TEXT,
            created_at TEXT NOT NULL,
            created_at_epoch_ms INTEGER NOT NULL,
            announced_at TEXT
        )""",
        "CREATE INDEX summaries_created ON summaries (created_at_epoch_ms)",
        """CREATE INDEX summaries_session_created
            ON summaries (memory_session_id, created_at_epoch_ms)""",
        "CREATE INDEX summaries_project_created ON summaries (project, created_at_epoch_ms)",
        """CREATE INDEX summaries_unannounced
            ON summaries (created_at_epoch_ms) WHERE announced_at IS NULL""",
        # FTS5: a later migration adds observations_fts/summaries_fts (external content)
        # with their sync triggers here, for `memq search`.
        """CREATE TABLE processed_events (
            memory_session_id TEXT NOT NULL
                REFERENCES sessions (memory_session_id) ON DELETE CASCADE,
            event_id TEXT NOT NULL,
            processed_at TEXT NOT NULL,
            PRIMARY KEY (memory_session_id, event_id)
        ) WITHOUT ROWID""",
        f"""CREATE TABLE dropped_outputs (
            {_SESSION_ROW},
            category TEXT NOT NULL,
            raw TEXT NOT NULL,
            event_ids TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL,
            reason TEXT,
            turn_kind TEXT NOT NULL,
            replayed_at TEXT
        )""",
        "CREATE INDEX dropped_outputs_created ON dropped_outputs (created_at)",
        "CREATE INDEX dropped_outputs_session ON dropped_outputs (memory_session_id)",
        f"""CREATE TABLE token_usage (
            {_SESSION_ROW},
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            cached_input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX token_usage_session ON token_usage (memory_session_id)",
    ),
    # 2: search. The vector queue (table vector_outbox: one row per stored observation or
    # summary, written by write_batch in the row's own transaction, drained into Chroma by
    # worker/search/vector_sync.py),
    # the resumable `memq reindex` marker, and full-text tables. The FTS tables keep their
    # own copy of the text (not external content) so facts and concepts are indexed as
    # words rather than JSON, and snippets show plain text.
    (
        """CREATE TABLE vector_outbox (
            kind TEXT NOT NULL CHECK (kind IN ('observation', 'summary')),
            row_id INTEGER NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            next_attempt_at_ms INTEGER NOT NULL DEFAULT 0,
            done_at TEXT,
            PRIMARY KEY (kind, row_id)
        ) WITHOUT ROWID""",
        """CREATE INDEX vector_outbox_due
            ON vector_outbox (next_attempt_at_ms, kind, row_id) WHERE state = 'pending'""",
        "INSERT INTO vector_outbox (kind, row_id) SELECT 'observation', id FROM observations",
        "INSERT INTO vector_outbox (kind, row_id) SELECT 'summary', id FROM summaries",
        "CREATE TABLE vector_reindex (scope TEXT PRIMARY KEY, started_at TEXT NOT NULL)",
        """CREATE VIRTUAL TABLE observations_fts USING fts5 (
            title, subtitle, narrative, facts, concepts,
            tokenize = 'porter unicode61 remove_diacritics 2'
        )""",
        # Default ranking: a title or concept match counts more than one in the narrative.
        """INSERT INTO observations_fts (observations_fts, rank)
            VALUES ('rank', 'bm25(4.0, 2.0, 1.0, 1.0, 2.0)')""",
        f"""CREATE TRIGGER observations_fts_insert AFTER INSERT ON observations BEGIN
            INSERT INTO observations_fts (rowid, title, subtitle, narrative, facts, concepts)
            VALUES (new.id, new.title, new.subtitle, new.narrative, {_words("new.facts")},
                    {_words("new.concepts")});
        END""",
        """CREATE TRIGGER observations_fts_delete AFTER DELETE ON observations BEGIN
            DELETE FROM observations_fts WHERE rowid = old.id;
        END""",
        f"""CREATE TRIGGER observations_fts_update
            AFTER UPDATE OF title, subtitle, narrative, facts, concepts ON observations BEGIN
            DELETE FROM observations_fts WHERE rowid = old.id;
            INSERT INTO observations_fts (rowid, title, subtitle, narrative, facts, concepts)
            VALUES (new.id, new.title, new.subtitle, new.narrative, {_words("new.facts")},
                    {_words("new.concepts")});
        END""",
        f"""INSERT INTO observations_fts (rowid, title, subtitle, narrative, facts, concepts)
            SELECT id, title, subtitle, narrative, {_words("facts")}, {_words("concepts")}
            FROM observations""",
        """CREATE VIRTUAL TABLE summaries_fts USING fts5 (
            request, investigated, learned, completed, next_steps, notes,
            tokenize = 'porter unicode61 remove_diacritics 2'
        )""",
        f"""CREATE TRIGGER summaries_fts_insert AFTER INSERT ON summaries BEGIN
            INSERT INTO summaries_fts ({_SUMMARY_TEXT})
            VALUES (new.id, new.request, new.investigated, new.learned, new.completed,
                    new.next_steps, new.notes);
        END""",
        """CREATE TRIGGER summaries_fts_delete AFTER DELETE ON summaries BEGIN
            DELETE FROM summaries_fts WHERE rowid = old.id;
        END""",
        f"""CREATE TRIGGER summaries_fts_update AFTER UPDATE OF
            request, investigated, learned, completed, next_steps, notes ON summaries BEGIN
            DELETE FROM summaries_fts WHERE rowid = old.id;
            INSERT INTO summaries_fts ({_SUMMARY_TEXT})
            VALUES (new.id, new.request, new.investigated, new.learned, new.completed,
                    new.next_steps, new.notes);
        END""",
        f"""INSERT INTO summaries_fts ({_SUMMARY_TEXT})
            SELECT id, request, investigated, learned, completed, next_steps, notes
            FROM summaries""",
    ),
    # 3: the sweep prunes processed_events by age (Store.prune_processed).
    ("CREATE INDEX processed_events_processed_at ON processed_events (processed_at)",),
    # 4: freshness: each observation keeps the hashes of its evidence files (a JSON object).
    ("ALTER TABLE observations ADD COLUMN file_hashes TEXT NOT NULL DEFAULT '{}'",),
    # 5: what a call cost in USD when the provider says (claude-code does); NULL otherwise.
    ("ALTER TABLE token_usage ADD COLUMN cost_usd REAL",),
)

SCHEMA_VERSION = len(MIGRATIONS)
BUSY_TIMEOUT_MS = 10_000
_CONNECTION_PRAGMAS = (
    "PRAGMA synchronous = NORMAL",  # durable in WAL mode except on power loss, and fast
    "PRAGMA foreign_keys = ON",
)


async def configure(conn: aiosqlite.Connection) -> None:
    """Set the busy timeout, WAL journal mode, synchronous=NORMAL and foreign keys."""
    await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
    await _enable_wal(conn)
    for pragma in _CONNECTION_PRAGMAS:
        await conn.execute(pragma)


async def _enable_wal(conn: aiosqlite.Connection) -> None:
    # Two connections switching a new file to WAL at once each hold a shared lock and want
    # an exclusive one; SQLite answers SQLITE_BUSY without its busy handler (to avoid a
    # deadlock), so the switch is retried here, within the same busy timeout.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            await conn.execute_fetchall("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or loop.time() > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)


async def schema_version(conn: aiosqlite.Connection) -> int:
    """The schema version recorded in the database file (0 for a new file)."""
    rows = list(await conn.execute_fetchall("PRAGMA user_version"))
    return int(rows[0][0])


async def migrate_schema(conn: aiosqlite.Connection, path: Path) -> None:
    """Apply the missing migrations in one IMMEDIATE transaction; a no-op when current."""
    if _check_version(await schema_version(conn), path) == SCHEMA_VERSION:
        return
    try:
        await conn.execute("BEGIN IMMEDIATE")
        # Another process may have migrated while this one waited for the write lock.
        current = _check_version(await schema_version(conn), path)
        for step in MIGRATIONS[current:]:
            for statement in step:
                await conn.execute(statement)
        await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        await conn.execute("COMMIT")
    except BaseException:
        await rollback(conn)
        raise


async def rollback(conn: aiosqlite.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already ended it."""
    # No transaction when BEGIN never succeeded, or SQLite already rolled back (e.g. disk full).
    with contextlib.suppress(sqlite3.OperationalError):
        await conn.execute("ROLLBACK")


def _check_version(version: int, path: Path) -> int:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this memq knows"
            f" ({SCHEMA_VERSION}): upgrade memq"
        )
    return version
