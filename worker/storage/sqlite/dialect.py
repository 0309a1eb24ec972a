"""SQLite's spelling of the Store's statements (numbered placeholders read as ?1)."""

from __future__ import annotations

from worker.storage.sql.dialect import Dialect
from worker.storage.sql.params import json_list
from worker.storage.sql.rows import RowSelects
from worker.storage.sqlite.text_search import text_search

# BEGIN IMMEDIATE holds the write lock, so the fence read stays current until COMMIT.
_LOCK_SESSION_FENCE = "SELECT fence FROM sessions WHERE memory_session_id = $1"

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

SQLITE = Dialect(
    selects=RowSelects(),
    lock_session_fence=_LOCK_SESSION_FENCE,
    insert_processed=_INSERT_PROCESSED,
    select_processed=_SELECT_PROCESSED,
    id_in="id IN (SELECT value FROM json_each($1))",
    claim=_CLAIM,
    lock_reindex=None,
    # Lists travel as JSON text, read back by json_each().
    list_param=json_list,
    text_search=text_search,
)
