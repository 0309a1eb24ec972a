"""PostgreSQL's spelling of the Store's statements."""

from __future__ import annotations

from collections.abc import Sequence

from worker.storage.postgres.text_search import text_search
from worker.storage.sql.dialect import Dialect
from worker.storage.sql.rows import RowSelects

_LOCK_SESSION_FENCE = "SELECT fence FROM sessions WHERE memory_session_id = $1 FOR UPDATE"

_INSERT_PROCESSED = """
INSERT INTO processed_events (memory_session_id, event_id, processed_at)
SELECT $1, event_id, $3 FROM unnest($2::text[]) AS event_id
ON CONFLICT DO NOTHING
"""

_SELECT_PROCESSED = """
SELECT event_id FROM processed_events
WHERE memory_session_id = $1 AND event_id = ANY($2::text[])
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


def _array(values: Sequence[object]) -> list[object]:
    # asyncpg sends a list as a PostgreSQL array.
    return list(values)


POSTGRES = Dialect(
    selects=RowSelects("::text"),
    lock_session_fence=_LOCK_SESSION_FENCE,
    insert_processed=_INSERT_PROCESSED,
    select_processed=_SELECT_PROCESSED,
    id_in="id = ANY($1::bigint[])",
    claim=_CLAIM,
    lock_reindex="SELECT pg_advisory_xact_lock(hashtext($1))",
    list_param=_array,
    text_search=text_search,
)
