"""The PostgreSQL schema: ordered migrations, applied once under an advisory lock."""

from __future__ import annotations

from typing import Any

from worker.storage.protocol import StoreError

# Any constant works: it only has to be the same in every memq process on one database.
MIGRATION_LOCK_KEY = 0x6D656D71_0001  # "memq", 1

# Words of a JSON list of strings, for the tsvector (facts and concepts are JSON lists).
_JSON_WORDS = "jsonb_to_tsvector('memq_text', {column}, '[\"string\"]')"


def _text(column: str) -> str:
    return f"to_tsvector('memq_text', coalesce({column}, ''))"


def _weighted(parts: list[tuple[str, str]]) -> str:
    return " || ".join(f"setweight({sql}, '{weight}')" for sql, weight in parts)


_OBSERVATION_SEARCH = _weighted(
    [
        (_text("title"), "A"),
        (_text("subtitle"), "B"),
        (_JSON_WORDS.format(column="concepts"), "B"),
        (_text("narrative"), "C"),
        (_JSON_WORDS.format(column="facts"), "C"),
    ]
)
_SUMMARY_SEARCH = _weighted(
    [
        (_text(column), "C")
        for column in ("request", "investigated", "learned", "completed", "next_steps", "notes")
    ]
)

# The leading columns of every table whose rows belong to one session.
_SESSION_ROW = """id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            memory_session_id TEXT COLLATE "C" NOT NULL
                REFERENCES sessions (memory_session_id) ON DELETE CASCADE,
            project TEXT COLLATE "C" NOT NULL"""

# Timestamps are ISO 8601 UTC text with milliseconds (as on SQLite, so rows read back alike
# and sort in time order) next to an epoch-ms BIGINT where queries order or filter by time.
# Keys and timestamps are COLLATE "C": byte order as on SQLite, whatever the database locale.
# Append new steps; never edit a released one. Each step runs in the migrating transaction.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        # English stemming like SQLite's porter tokenizer, but no stop words: "the" is a word.
        "CREATE TEXT SEARCH DICTIONARY memq_stem (TEMPLATE = snowball, LANGUAGE = english)",
        "CREATE TEXT SEARCH CONFIGURATION memq_text (COPY = english)",
        """ALTER TEXT SEARCH CONFIGURATION memq_text ALTER MAPPING
            FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH memq_stem""",
        """CREATE TABLE sessions (
            memory_session_id TEXT COLLATE "C" PRIMARY KEY,
            project TEXT COLLATE "C" NOT NULL,
            fence BIGINT NOT NULL DEFAULT 0,
            started_at TEXT COLLATE "C" NOT NULL,
            last_activity_at TEXT COLLATE "C" NOT NULL,
            ended_at TEXT COLLATE "C",
            prompt_counter INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX sessions_activity ON sessions (last_activity_at, memory_session_id)",
        """CREATE INDEX sessions_project_activity
            ON sessions (project, last_activity_at, memory_session_id)""",
        f"""CREATE TABLE user_prompts (
            {_SESSION_ROW},
            prompt_number INTEGER NOT NULL,
            prompt_text TEXT NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            event_id TEXT COLLATE "C" NOT NULL,
            UNIQUE (memory_session_id, event_id)
        )""",
        f"""CREATE TABLE observations (
            {_SESSION_ROW},
            type TEXT NOT NULL,
            title TEXT,
            subtitle TEXT,
            facts JSONB NOT NULL DEFAULT '[]',
            narrative TEXT,
            concepts JSONB NOT NULL DEFAULT '[]',
            files_read JSONB NOT NULL DEFAULT '[]',
            files_modified JSONB NOT NULL DEFAULT '[]',
            prompt_number INTEGER,
            content_hash TEXT COLLATE "C" NOT NULL,
            model TEXT,
            type_fallback BOOLEAN NOT NULL DEFAULT false,
            source_event_ids JSONB NOT NULL DEFAULT '[]',
            created_at TEXT COLLATE "C" NOT NULL,
            created_at_epoch_ms BIGINT NOT NULL,
            announced_at TEXT COLLATE "C",
            search TSVECTOR GENERATED ALWAYS AS ({_OBSERVATION_SEARCH}) STORED,
            UNIQUE (memory_session_id, content_hash)
        )""",
        "CREATE INDEX observations_created ON observations (created_at_epoch_ms, id)",
        """CREATE INDEX observations_session_created
            ON observations (memory_session_id, created_at_epoch_ms, id)""",
        """CREATE INDEX observations_project_created
            ON observations (project, created_at_epoch_ms, id)""",
        """CREATE INDEX observations_unannounced
            ON observations (created_at_epoch_ms, id) WHERE announced_at IS NULL""",
        "CREATE INDEX observations_search ON observations USING GIN (search)",
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
            created_at TEXT COLLATE "C" NOT NULL,
            created_at_epoch_ms BIGINT NOT NULL,
            announced_at TEXT COLLATE "C",
            search TSVECTOR GENERATED ALWAYS AS ({_SUMMARY_SEARCH}) STORED
        )""",
        "CREATE INDEX summaries_created ON summaries (created_at_epoch_ms, id)",
        """CREATE INDEX summaries_session_created
            ON summaries (memory_session_id, created_at_epoch_ms, id)""",
        "CREATE INDEX summaries_project_created ON summaries (project, created_at_epoch_ms, id)",
        """CREATE INDEX summaries_unannounced
            ON summaries (created_at_epoch_ms, id) WHERE announced_at IS NULL""",
        "CREATE INDEX summaries_search ON summaries USING GIN (search)",
        """CREATE TABLE processed_events (
            memory_session_id TEXT COLLATE "C" NOT NULL
                REFERENCES sessions (memory_session_id) ON DELETE CASCADE,
            event_id TEXT COLLATE "C" NOT NULL,
            processed_at TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (memory_session_id, event_id)
        )""",
        f"""CREATE TABLE dropped_outputs (
            {_SESSION_ROW},
            category TEXT NOT NULL,
            raw TEXT NOT NULL,
            event_ids JSONB NOT NULL DEFAULT '[]',
            created_at TEXT COLLATE "C" NOT NULL,
            reason TEXT,
            turn_kind TEXT NOT NULL,
            replayed_at TEXT COLLATE "C"
        )""",
        "CREATE INDEX dropped_outputs_created ON dropped_outputs (created_at, id)",
        "CREATE INDEX dropped_outputs_session ON dropped_outputs (memory_session_id)",
        f"""CREATE TABLE token_usage (
            {_SESSION_ROW},
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            input_tokens BIGINT NOT NULL,
            cached_input_tokens BIGINT NOT NULL,
            output_tokens BIGINT NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL
        )""",
        "CREATE INDEX token_usage_session ON token_usage (memory_session_id)",
        """CREATE TABLE vector_outbox (
            kind TEXT NOT NULL CHECK (kind IN ('observation', 'summary')),
            row_id BIGINT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            next_attempt_at_ms BIGINT NOT NULL DEFAULT 0,
            done_at TEXT COLLATE "C",
            PRIMARY KEY (kind, row_id)
        )""",
        """CREATE INDEX vector_outbox_due
            ON vector_outbox (next_attempt_at_ms, kind, row_id) WHERE state = 'pending'""",
        "CREATE TABLE vector_reindex (scope TEXT PRIMARY KEY, started_at TEXT NOT NULL)",
    ),
    # 2: the sweep prunes processed_events by age (Store.prune_processed).
    ("CREATE INDEX processed_events_processed_at ON processed_events (processed_at)",),
    # 3: freshness: each observation keeps the hashes of its evidence files.
    ("ALTER TABLE observations ADD COLUMN file_hashes JSONB NOT NULL DEFAULT '{}'",),
    # 4: what a call cost in USD when the provider says (claude-code does); NULL otherwise.
    ("ALTER TABLE token_usage ADD COLUMN cost_usd DOUBLE PRECISION",),
)

SCHEMA_VERSION = len(MIGRATIONS)

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS memq_schema_version (
    version INTEGER PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


async def schema_version(conn: Any) -> int:
    """The highest applied migration (0 for an empty database)."""
    exists = await conn.fetchval("SELECT to_regclass('memq_schema_version') IS NOT NULL")
    if not exists:
        return 0
    return int(await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM memq_schema_version"))


async def migrate_schema(conn: Any, where: str) -> None:
    """Apply the missing migrations in one transaction; concurrent workers migrate once."""
    if _check_version(await schema_version(conn), where) == SCHEMA_VERSION:
        return
    async with conn.transaction():
        # Held to the end of the transaction: the others wait, then find the schema current.
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        await conn.execute(_VERSION_TABLE)
        current = _check_version(await schema_version(conn), where)
        for number, step in enumerate(MIGRATIONS[current:], start=current + 1):
            for statement in step:
                await conn.execute(statement)
            await conn.execute("INSERT INTO memq_schema_version (version) VALUES ($1)", number)


def _check_version(version: int, where: str) -> int:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"PostgreSQL database {where} has schema version {version}, newer than this memq"
            f" knows ({SCHEMA_VERSION}): upgrade memq"
        )
    return version
