"""SQLite's spelling of the Store's statements (numbered placeholders read as ?1)."""

from __future__ import annotations

from worker.storage.dialect import Dialect
from worker.storage.params import json_list
from worker.storage.rows import RowSelects
from worker.storage.sql_conn import Query
from worker.storage.sqlite.text_search import text_search

SELECTS = RowSelects()

# BEGIN IMMEDIATE holds the write lock, so the fence read stays current until COMMIT.
_LOCK_SESSION_FENCE = "SELECT fence FROM sessions WHERE memory_session_id = $1"

_UPSERT_SESSION = """
INSERT INTO sessions (memory_session_id, project, fence, started_at, last_activity_at,
                      ended_at, prompt_counter)
VALUES ($1, $2, $3, $4, $4, $5, $6)
ON CONFLICT (memory_session_id) DO UPDATE SET
    project = excluded.project,
    fence = excluded.fence,
    last_activity_at = excluded.last_activity_at,
    ended_at = COALESCE(excluded.ended_at, sessions.ended_at),
    prompt_counter = MAX(sessions.prompt_counter, excluded.prompt_counter)
"""

_INSERT_PROMPT = """
INSERT INTO user_prompts (memory_session_id, project, prompt_number, prompt_text, created_at,
                          event_id)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (memory_session_id, event_id) DO NOTHING
"""

_INSERT_OBSERVATION = """
INSERT INTO observations (memory_session_id, project, type, title, subtitle, facts, narrative,
    concepts, files_read, files_modified, prompt_number, content_hash, model, type_fallback,
    source_event_ids, created_at, created_at_epoch_ms, file_hashes)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (memory_session_id, content_hash) DO NOTHING
RETURNING id
"""

_INSERT_SUMMARY = """
INSERT INTO summaries (memory_session_id, project, request, investigated, learned, completed,
    next_steps, notes, prompt_number, model, created_at, created_at_epoch_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id
"""

_INSERT_DROPPED = """
INSERT INTO dropped_outputs (memory_session_id, project, category, raw, event_ids, created_at,
    reason, turn_kind)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""

_INSERT_USAGE = """
INSERT INTO token_usage (memory_session_id, project, provider, model, input_tokens,
    cached_input_tokens, output_tokens, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""

_INSERT_OUTBOX = "INSERT INTO vector_outbox (kind, row_id) VALUES (?, ?) ON CONFLICT DO NOTHING"

# `WHERE true`: without it SQLite would read ON CONFLICT as the join's ON.
_INSERT_PROCESSED = """
INSERT INTO processed_events (memory_session_id, event_id, processed_at)
SELECT $1, value, $3 FROM json_each($2) WHERE true
ON CONFLICT DO NOTHING
"""

_SELECT_PROCESSED = (
    "SELECT event_id FROM processed_events WHERE memory_session_id = $1"
    " AND event_id IN (SELECT value FROM json_each($2))"
)

_CLAIM = """
UPDATE vector_outbox SET next_attempt_at_ms = $3
WHERE (kind, row_id) IN (
    SELECT kind, row_id FROM vector_outbox
    WHERE state = 'pending' AND next_attempt_at_ms <= $2
    ORDER BY next_attempt_at_ms, kind, row_id LIMIT $1)
RETURNING kind, row_id, attempts
"""

_SELECT_SESSIONS = """
SELECT s.memory_session_id, s.project, s.started_at, s.last_activity_at, s.ended_at,
    (SELECT COUNT(*) FROM user_prompts p WHERE p.memory_session_id = s.memory_session_id)
        AS prompts,
    (SELECT COUNT(*) FROM observations o WHERE o.memory_session_id = s.memory_session_id)
        AS observations,
    (SELECT COUNT(*) FROM summaries m WHERE m.memory_session_id = s.memory_session_id)
        AS summaries
FROM sessions s {where}
ORDER BY s.last_activity_at DESC, s.memory_session_id DESC
LIMIT :limit
"""

_SELECT_DROPPED = """
SELECT id, memory_session_id, project, category, raw, event_ids, created_at, reason, turn_kind,
    replayed_at
FROM dropped_outputs {where}
ORDER BY created_at DESC, id DESC
LIMIT :limit
"""


def _observations_query(memory_session_id: str | None, project: str | None, limit: int) -> Query:
    # Only the filters given: `:sid IS NULL OR …` would keep SQLite off the indexes.
    conditions = []
    if memory_session_id is not None:
        conditions.append("memory_session_id = :sid")
    if project is not None:
        conditions.append("project = :project")
    sql = SELECTS.merged(conditions, ":limit", newest_first=True)
    return sql, {"sid": memory_session_id, "project": project, "limit": limit}


def _sessions_query(project: str | None, limit: int) -> Query:
    where = "" if project is None else "WHERE s.project = :project"
    return _SELECT_SESSIONS.format(where=where), {"project": project, "limit": limit}


def _dropped_query(limit: int, include_replayed: bool) -> Query:
    where = "" if include_replayed else "WHERE replayed_at IS NULL"
    return _SELECT_DROPPED.format(where=where), {"limit": limit}


SQLITE = Dialect(
    selects=SELECTS,
    lock_session_fence=_LOCK_SESSION_FENCE,
    upsert_session=_UPSERT_SESSION,
    insert_prompt=_INSERT_PROMPT,
    insert_observation=_INSERT_OBSERVATION,
    insert_summary=_INSERT_SUMMARY,
    insert_dropped=_INSERT_DROPPED,
    insert_usage=_INSERT_USAGE,
    insert_outbox=_INSERT_OUTBOX,
    insert_processed=_INSERT_PROCESSED,
    select_processed=_SELECT_PROCESSED,
    id_in="id IN (SELECT value FROM json_each($1))",
    claim=_CLAIM,
    nullable_text="$1",
    lock_reindex=None,
    # Lists travel as JSON text, read back by json_each().
    list_param=json_list,
    id_list=json_list,
    observations_query=_observations_query,
    sessions_query=_sessions_query,
    dropped_query=_dropped_query,
    text_search=text_search,
)
