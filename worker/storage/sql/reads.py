"""Reads on a SQL database: the replay guard, listings for the UI and CLI, lookups by key."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import msgspec

from worker.storage import records
from worker.storage.index_records import TABLE_OF, RowKind, TimelineEntry
from worker.storage.sql import listings
from worker.storage.sql import params as p
from worker.storage.sql import rows as r
from worker.storage.sql.conn import SqlConn, SqlDatabase
from worker.storage.sql.dialect import Dialect

_TIMELINE_ORDER = {"prompt": 0, "observation": 1, "summary": 2}

# CAST, not ::bigint: both dialects read it (PostgreSQL's SUM of BIGINT is NUMERIC).
_SELECT_COUNTS = """
SELECT (SELECT COUNT(*) FROM sessions) AS sessions,
    (SELECT COUNT(*) FROM observations) AS observations,
    (SELECT COUNT(*) FROM summaries) AS summaries,
    (SELECT COUNT(*) FROM user_prompts) AS prompts,
    (SELECT COUNT(*) FROM dropped_outputs) AS dropped_outputs,
    (SELECT CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) FROM token_usage) AS input_tokens,
    (SELECT CAST(COALESCE(SUM(cached_input_tokens), 0) AS BIGINT) FROM token_usage)
        AS cached_input_tokens,
    (SELECT CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) FROM token_usage) AS output_tokens
"""
# Per project and UTC day, in both dialects. Calls: a stored time is ISO text in UTC
# (`2024-05-01T12:00:00.123Z`), so its first ten characters are the day and text order is
# time order; $1 the first day's midnight as that text. Observations: the day number since
# the epoch from created_at_epoch_ms, which the (project, created_at_epoch_ms) index covers
# (reading created_at instead fetched every row: 4x slower on 400k rows); $1 in ms.
_CALLS_BY_DAY = """
SELECT project, substr(created_at, 1, 10) AS day,
    CAST(SUM(input_tokens) AS BIGINT) AS input_tokens,
    CAST(SUM(cached_input_tokens) AS BIGINT) AS cached_input_tokens,
    CAST(SUM(output_tokens) AS BIGINT) AS output_tokens,
    COUNT(*) AS calls,
    SUM(cost_usd) AS reported_cost_usd
FROM token_usage WHERE created_at >= $1
GROUP BY project, substr(created_at, 1, 10)
"""
_OBSERVATIONS_BY_DAY = """
SELECT project, created_at_epoch_ms / 86400000 AS day_number, COUNT(*) AS observations
FROM observations WHERE created_at_epoch_ms >= $1
GROUP BY project, created_at_epoch_ms / 86400000
"""
_EPOCH_DAY = date(1970, 1, 1)
_TIMELINE_PROMPTS = (
    "SELECT id, created_at, prompt_number, prompt_text FROM user_prompts"
    " WHERE memory_session_id = $1 ORDER BY created_at, id LIMIT $2"
)
_SESSION_FENCE = "SELECT fence FROM sessions WHERE memory_session_id = $1"
# Ids follow commit order, which is publish order: one lease holder commits a session's turns.
# A prompt published without a number is stored as 0: its position stands in for it.
_LATEST_PROMPT = """
SELECT CASE WHEN prompt_number > 0 THEN prompt_number
            ELSE (SELECT COUNT(*) FROM user_prompts WHERE memory_session_id = $1) END
         AS prompt_number,
       prompt_text, created_at
FROM user_prompts WHERE memory_session_id = $1 ORDER BY id DESC LIMIT 1
"""


async def processed_event_ids(
    db: SqlDatabase, dialect: Dialect, memory_session_id: str, event_ids: Sequence[str]
) -> set[str]:
    """The subset of event_ids already processed for the session."""
    if not event_ids:
        return set()
    values = (memory_session_id, dialect.list_param(event_ids))
    async with db.use() as conn:
        found = await conn.fetch(dialect.select_processed, values)
    return {str(row["event_id"]) for row in found}


async def unannounced(
    db: SqlDatabase, dialect: Dialect, limit: int, memory_session_id: str | None
) -> list[records.StoredRow]:
    """Stored rows not yet announced on pub/sub and the feed (of one session), oldest first."""
    conditions = ["announced_at IS NULL"]
    values: list[object] = [limit]
    if memory_session_id is not None:
        conditions.append("memory_session_id = $2")
        values.append(memory_session_id)
    sql = dialect.selects.merged(conditions, "$1", newest_first=False)
    async with db.use() as conn:
        found = await conn.fetch(sql, values)
    return [r.stored_row(row) for row in found]


async def observations(
    db: SqlDatabase,
    dialect: Dialect,
    memory_session_id: str | None,
    project: str | None,
    limit: int,
) -> list[records.StoredRow]:
    """Newest stored observations and summaries first, optionally filtered."""
    sql, values = listings.observations_query(dialect.selects, memory_session_id, project, limit)
    async with db.use() as conn:
        found = await conn.fetch(sql, values)
    return [r.stored_row(row) for row in found]


async def sessions(db: SqlDatabase, project: str | None, limit: int) -> list[records.SessionRow]:
    """Sessions with activity, newest first."""
    sql, values = listings.sessions_query(project, limit)
    async with db.use() as conn:
        found = await conn.fetch(sql, values)
    return [r.session_row(row) for row in found]


async def dropped(db: SqlDatabase, limit: int, include_replayed: bool) -> list[records.DroppedRow]:
    """Kept dropped replies, newest first."""
    sql, values = listings.dropped_query(limit, include_replayed)
    async with db.use() as conn:
        found = await conn.fetch(sql, values)
    return [r.dropped_row(row) for row in found]


async def counts(db: SqlDatabase) -> records.StoreCounts:
    """Row counts and token totals."""
    async with db.use() as conn:
        row = await conn.fetchrow(_SELECT_COUNTS)
    assert row is not None  # a SELECT without FROM always has its row
    return r.store_counts(row)


async def cost_by_day(db: SqlDatabase, now: datetime, days: int) -> list[records.CostDay]:
    """Per project and UTC day of the last `days` days (today included), oldest first: the
    observer's tokens and calls, and the observations stored; days with neither left out."""
    utc = p.as_utc(now)
    first = datetime(utc.year, utc.month, utc.day, tzinfo=UTC) - timedelta(days=days - 1)
    async with db.use() as conn:
        calls = await conn.fetch(_CALLS_BY_DAY, (p.iso_utc(first),))
        stored = await conn.fetch(_OBSERVATIONS_BY_DAY, (p.epoch_ms(first),))
    found = {(row["project"], row["day"]): r.cost_day(row) for row in calls}
    for row in stored:
        day = (_EPOCH_DAY + timedelta(days=int(row["day_number"]))).isoformat()
        key = (row["project"], day)
        spent = found.get(key) or records.CostDay(project=row["project"], day=day)
        found[key] = msgspec.structs.replace(spent, observations=int(row["observations"]))
    return [found[key] for key in sorted(found, key=lambda k: (k[1], k[0]))]


async def session_fence(db: SqlDatabase, memory_session_id: str) -> int | None:
    """The session's stored fencing token, or None for an unknown session."""
    async with db.use() as conn:
        found = await conn.fetchrow(_SESSION_FENCE, (memory_session_id,))
    return None if found is None else int(found["fence"])


async def latest_prompt(db: SqlDatabase, memory_session_id: str) -> records.StoredPrompt | None:
    """The session's last stored user request, or None when it has none."""
    async with db.use() as conn:
        found = await conn.fetchrow(_LATEST_PROMPT, (memory_session_id,))
    if found is None:
        return None
    return records.StoredPrompt(
        prompt_number=int(found["prompt_number"]),
        prompt_text=found["prompt_text"],
        created_at=datetime.fromisoformat(found["created_at"]),
    )


async def latest_summary(
    db: SqlDatabase, dialect: Dialect, project: str
) -> records.StoredRow | None:
    """The project's newest summary."""
    sql = dialect.selects.one_kind(
        "summary", "project = $1", "ORDER BY created_at_epoch_ms DESC, id DESC LIMIT 1"
    )
    async with db.use() as conn:
        found = await conn.fetchrow(sql, (project,))
    return None if found is None else r.stored_row(found)


async def timeline(
    db: SqlDatabase, dialect: Dialect, memory_session_id: str, limit: int
) -> list[TimelineEntry]:
    """A session's prompts, observations and summaries in time order (the first `limit`)."""
    rows_sql = dialect.selects.merged(["memory_session_id = $2"], "$1", newest_first=False)
    async with db.use() as conn:
        prompts = await conn.fetch(_TIMELINE_PROMPTS, (memory_session_id, limit))
        stored = await conn.fetch(rows_sql, (limit, memory_session_id))
    entries = [
        TimelineEntry(
            kind="prompt",
            id=p["id"],
            created_at=p["created_at"],
            prompt_number=p["prompt_number"],
            prompt_text=p["prompt_text"],
        )
        for p in prompts
    ]
    for raw in stored:
        row = r.stored_row(raw)
        entries.append(
            TimelineEntry(
                kind=row.kind,
                id=row.id,
                created_at=row.created_at,
                prompt_number=row.prompt_number,
                row=row,
            )
        )
    entries.sort(key=lambda e: (e.created_at, _TIMELINE_ORDER[e.kind], e.id))
    return entries[:limit]


async def rows_by_keys(
    db: SqlDatabase, dialect: Dialect, keys: Sequence[tuple[RowKind, int]]
) -> list[records.StoredRow]:
    """The stored rows with these (kind, id) keys, in the keys' order; missing ones skipped."""
    async with db.use() as conn:
        found = await fetch_by_keys(conn, dialect, keys)
    by_key = {(row.kind, row.id): row for row in found}
    return [by_key[k] for k in keys if k in by_key]


async def fetch_by_keys(
    conn: SqlConn, dialect: Dialect, keys: Sequence[tuple[RowKind, int]]
) -> list[records.StoredRow]:
    """The stored rows with these keys, in no particular order."""
    found: list[records.StoredRow] = []
    for kind in TABLE_OF:
        ids = [i for k, i in keys if k == kind]
        if ids:
            sql = dialect.selects.one_kind(kind, dialect.id_in)
            rows = await conn.fetch(sql, (dialect.list_param(ids),))
            found.extend(r.stored_row(row) for row in rows)
    return found
