"""PostgreSQL's spelling of the Store's statements."""

from __future__ import annotations

from collections.abc import Sequence

from worker.storage.dialect import Dialect
from worker.storage.postgres.text_search import text_search
from worker.storage.rows import RowSelects
from worker.storage.sql_conn import Query

_UPSERT_SESSION = """
INSERT INTO sessions AS s (memory_session_id, project, fence, started_at, last_activity_at,
                           ended_at, prompt_counter)
VALUES ($1, $2, $3, $4, $4, $5, $6)
ON CONFLICT (memory_session_id) DO UPDATE SET
    project = excluded.project,
    fence = excluded.fence,
    last_activity_at = excluded.last_activity_at,
    ended_at = COALESCE(excluded.ended_at, s.ended_at),
    prompt_counter = GREATEST(s.prompt_counter, excluded.prompt_counter)
WHERE s.fence <= excluded.fence
"""

_LOCK_SESSION_FENCE = "SELECT fence FROM sessions WHERE memory_session_id = $1 FOR UPDATE"

_INSERT_PROMPT = """
INSERT INTO user_prompts (memory_session_id, project, prompt_number, prompt_text, created_at,
                          event_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (memory_session_id, event_id) DO NOTHING
"""

# Parameters as params.observation_params gives them (JSON lists as text, the flag as 0/1).
_INSERT_OBSERVATION = """
INSERT INTO observations (memory_session_id, project, type, title, subtitle, facts, narrative,
    concepts, files_read, files_modified, prompt_number, content_hash, model, type_fallback,
    source_event_ids, created_at, created_at_epoch_ms, file_hashes)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12, $13,
    $14::int <> 0, $15::jsonb, $16, $17, $18::jsonb)
ON CONFLICT (memory_session_id, content_hash) DO NOTHING
RETURNING id
"""

_INSERT_SUMMARY = """
INSERT INTO summaries (memory_session_id, project, request, investigated, learned, completed,
    next_steps, notes, prompt_number, model, created_at, created_at_epoch_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING id
"""

_INSERT_DROPPED = """
INSERT INTO dropped_outputs (memory_session_id, project, category, raw, event_ids, created_at,
    reason, turn_kind)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)
"""

_INSERT_USAGE = """
INSERT INTO token_usage (memory_session_id, project, provider, model, input_tokens,
    cached_input_tokens, output_tokens, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
"""

_INSERT_OUTBOX = "INSERT INTO vector_outbox (kind, row_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"

_INSERT_PROCESSED = """
INSERT INTO processed_events (memory_session_id, event_id, processed_at)
SELECT $1, event_id, $3 FROM unnest($2::text[]) AS event_id
ON CONFLICT DO NOTHING
"""

_SELECT_PROCESSED = """
SELECT event_id FROM processed_events
WHERE memory_session_id = $1 AND event_id = ANY($2::text[])
"""

SELECTS = RowSelects("::text")

_SELECT_SESSIONS = """
SELECT s.memory_session_id, s.project, s.started_at, s.last_activity_at, s.ended_at,
    (SELECT COUNT(*) FROM user_prompts p WHERE p.memory_session_id = s.memory_session_id)
        AS prompts,
    (SELECT COUNT(*) FROM observations o WHERE o.memory_session_id = s.memory_session_id)
        AS observations,
    (SELECT COUNT(*) FROM summaries m WHERE m.memory_session_id = s.memory_session_id)
        AS summaries
FROM sessions s WHERE ($2::text IS NULL OR s.project = $2)
ORDER BY s.last_activity_at DESC, s.memory_session_id DESC
LIMIT $1
"""

_SELECT_DROPPED = """
SELECT id, memory_session_id, project, category, raw, event_ids::text AS event_ids,
    created_at, reason, turn_kind, replayed_at
FROM dropped_outputs WHERE ($2 OR replayed_at IS NULL)
ORDER BY created_at DESC, id DESC
LIMIT $1
"""

# SKIP LOCKED: workers on other machines claim other rows instead of queueing behind these.
_CLAIM = """
UPDATE vector_outbox o SET next_attempt_at_ms = $3
FROM (SELECT kind, row_id FROM vector_outbox
      WHERE state = 'pending' AND next_attempt_at_ms <= $2
      ORDER BY next_attempt_at_ms, kind, row_id LIMIT $1
      FOR UPDATE SKIP LOCKED) AS due
WHERE o.kind = due.kind AND o.row_id = due.row_id
RETURNING o.kind, o.row_id, o.attempts
"""


def _observations_query(memory_session_id: str | None, project: str | None, limit: int) -> Query:
    conditions = [
        "($2::text IS NULL OR memory_session_id = $2)",
        "($3::text IS NULL OR project = $3)",
    ]
    sql = SELECTS.merged(conditions, "$1", newest_first=True)
    return sql, (limit, memory_session_id, project)


def _sessions_query(project: str | None, limit: int) -> Query:
    return _SELECT_SESSIONS, (limit, project)


def _dropped_query(limit: int, include_replayed: bool) -> Query:
    return _SELECT_DROPPED, (limit, include_replayed)


def _array(values: Sequence[object]) -> list[object]:
    # asyncpg sends a list as a PostgreSQL array.
    return list(values)


POSTGRES = Dialect(
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
    id_in="id = ANY($1::bigint[])",
    claim=_CLAIM,
    nullable_text="$1::text",
    lock_reindex="SELECT pg_advisory_xact_lock(hashtext($1))",
    list_param=_array,
    id_list=_array,
    observations_query=_observations_query,
    sessions_query=_sessions_query,
    dropped_query=_dropped_query,
    text_search=text_search,
)
