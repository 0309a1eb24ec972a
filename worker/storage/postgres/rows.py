"""PostgreSQL statements for the Store, and the FTS5 match expression as a tsquery."""

from __future__ import annotations

import re

from worker.storage.rows import SHARED_COLUMNS, RowSelects

UPSERT_SESSION = """
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

LOCK_SESSION_FENCE = "SELECT fence FROM sessions WHERE memory_session_id = $1 FOR UPDATE"

INSERT_PROMPT = """
INSERT INTO user_prompts (memory_session_id, project, prompt_number, prompt_text, created_at,
                          event_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (memory_session_id, event_id) DO NOTHING
"""

# Parameters as rows.observation_params gives them (JSON lists as text, the flag as 0/1).
INSERT_OBSERVATION = """
INSERT INTO observations (memory_session_id, project, type, title, subtitle, facts, narrative,
    concepts, files_read, files_modified, prompt_number, content_hash, model, type_fallback,
    source_event_ids, created_at, created_at_epoch_ms)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11, $12, $13,
    $14::int <> 0, $15::jsonb, $16, $17)
ON CONFLICT (memory_session_id, content_hash) DO NOTHING
RETURNING id
"""

INSERT_SUMMARY = """
INSERT INTO summaries (memory_session_id, project, request, investigated, learned, completed,
    next_steps, notes, prompt_number, model, created_at, created_at_epoch_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING id
"""

INSERT_DROPPED = """
INSERT INTO dropped_outputs (memory_session_id, project, category, raw, event_ids, created_at,
    reason, turn_kind)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)
"""

INSERT_USAGE = """
INSERT INTO token_usage (memory_session_id, project, provider, model, input_tokens,
    cached_input_tokens, output_tokens, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
"""

INSERT_OUTBOX = "INSERT INTO vector_outbox (kind, row_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"

INSERT_PROCESSED = """
INSERT INTO processed_events (memory_session_id, event_id, processed_at)
SELECT $1, event_id, $3 FROM unnest($2::text[]) AS event_id
ON CONFLICT DO NOTHING
"""

SELECT_PROCESSED = """
SELECT event_id FROM processed_events
WHERE memory_session_id = $1 AND event_id = ANY($2::text[])
"""

# Columns in the order rows.stored_row maps; JSON lists come back as text.
SELECTS = RowSelects(
    f"'observation'::text AS kind, {SHARED_COLUMNS}, type, title, subtitle, facts::text,"
    " narrative, concepts::text, files_read::text, files_modified::text, NULL::text,"
    " NULL::text, NULL::text, NULL::text, NULL::text, NULL::text",
    f"'summary'::text AS kind, {SHARED_COLUMNS}, NULL::text, NULL::text, NULL::text,"
    " NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,"
    " request, investigated, learned, completed, next_steps, notes",
)


SELECT_SESSIONS = """
SELECT s.memory_session_id, s.project, s.started_at, s.last_activity_at, s.ended_at,
    (SELECT COUNT(*) FROM user_prompts p WHERE p.memory_session_id = s.memory_session_id),
    (SELECT COUNT(*) FROM observations o WHERE o.memory_session_id = s.memory_session_id),
    (SELECT COUNT(*) FROM summaries m WHERE m.memory_session_id = s.memory_session_id)
FROM sessions s WHERE ($2::text IS NULL OR s.project = $2)
ORDER BY s.last_activity_at DESC, s.memory_session_id DESC
LIMIT $1
"""

SELECT_DROPPED = """
SELECT id, memory_session_id, project, category, raw, event_ids::text, created_at, reason,
    turn_kind, replayed_at
FROM dropped_outputs WHERE ($2 OR replayed_at IS NULL)
ORDER BY created_at DESC, id DESC
LIMIT $1
"""

SELECT_COUNTS = """
SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM observations),
    (SELECT COUNT(*) FROM summaries), (SELECT COUNT(*) FROM user_prompts),
    (SELECT COUNT(*) FROM dropped_outputs),
    (SELECT COALESCE(SUM(input_tokens), 0)::bigint FROM token_usage),
    (SELECT COALESCE(SUM(cached_input_tokens), 0)::bigint FROM token_usage),
    (SELECT COALESCE(SUM(output_tokens), 0)::bigint FROM token_usage)
"""

# One term of the FTS5 expression worker/search/hybrid.py builds: "word", "a phrase", "prefix"*.
_FTS5_TERM = re.compile(r'"([^"]*)"(\*?)')


def tsquery_text(match: str) -> str:
    """The to_tsquery text of an FTS5 match expression: every term must match.

    Each quoted term stays one quoted tsquery operand, which to_tsquery turns into a phrase
    of its words (stemmed by the same configuration as the rows); `*` keeps a prefix match.
    """
    operands = []
    for m in _FTS5_TERM.finditer(match):
        text, prefix = m.group(1), m.group(2)
        if not text.strip():
            continue
        quoted = "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
        operands.append(quoted + (":*" if prefix else ""))
    return " & ".join(operands)
