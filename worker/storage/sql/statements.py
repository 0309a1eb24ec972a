"""The INSERTs of a turn's write, in the same words on both backends.

Each is built from its table's column list, and its parameters are read from a record by
those names, so a column is named once. Placeholders are numbered ($1); SQLite's connection
adapter reads them as ?1.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from pipeline.records import (
    DroppedOutput,
    ObservationRow,
    PromptRow,
    SummaryRow,
    TokenUsage,
)
from worker.storage.sql.params import column_value

R = TypeVar("R", bound=msgspec.Struct)


class Insert(msgspec.Struct, Generic[R], frozen=True):
    """One INSERT statement and the columns its parameters fill, in order, from an R."""

    sql: str
    columns: tuple[str, ...]

    def values(self, record: R) -> tuple[Any, ...]:
        """The statement's parameters: each column's value from the record's field of that name."""
        return tuple(column_value(record, column) for column in self.columns)


def _insert(table: str, columns: str, then: str = "") -> Insert[Any]:
    names = tuple(name.strip() for name in columns.split(","))
    placeholders = ", ".join(f"${n}" for n in range(1, len(names) + 1))
    sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders}) {then}"
    return Insert(sql=sql.strip(), columns=names)


PROMPT: Insert[PromptRow] = _insert(
    "user_prompts",
    "memory_session_id, project, prompt_number, prompt_text, created_at, event_id",
    "ON CONFLICT (memory_session_id, event_id) DO NOTHING",
)
# No row back for a duplicate observation (same content hash in the session).
OBSERVATION: Insert[ObservationRow] = _insert(
    "observations",
    "memory_session_id, project, type, title, subtitle, facts, narrative, concepts, files_read,"
    " files_modified, prompt_number, content_hash, model, type_fallback, source_event_ids,"
    " created_at, created_at_epoch_ms, file_hashes",
    "ON CONFLICT (memory_session_id, content_hash) DO NOTHING RETURNING id",
)
SUMMARY: Insert[SummaryRow] = _insert(
    "summaries",
    "memory_session_id, project, request, investigated, learned, completed, next_steps, notes,"
    " prompt_number, model, created_at, created_at_epoch_ms",
    "RETURNING id",
)
DROPPED: Insert[DroppedOutput] = _insert(
    "dropped_outputs",
    "memory_session_id, project, category, raw, event_ids, created_at, reason, turn_kind",
)
USAGE: Insert[TokenUsage] = _insert(
    "token_usage",
    "memory_session_id, project, provider, model, input_tokens, cached_input_tokens,"
    " output_tokens, created_at, cost_usd",
)
# $1 sid, $2 project, $3 fence, $4 now, $5 ended_at, $6 prompt_counter; changes one row
# unless a higher fence is stored. CASE for the larger counter: PostgreSQL spells it
# GREATEST, SQLite MAX.
SESSION_UPSERT = """
INSERT INTO sessions AS s (memory_session_id, project, fence, started_at, last_activity_at,
                           ended_at, prompt_counter)
VALUES ($1, $2, $3, $4, $4, $5, $6)
ON CONFLICT (memory_session_id) DO UPDATE SET
    project = excluded.project,
    fence = excluded.fence,
    last_activity_at = excluded.last_activity_at,
    ended_at = COALESCE(excluded.ended_at, s.ended_at),
    prompt_counter = CASE WHEN s.prompt_counter > excluded.prompt_counter
                          THEN s.prompt_counter ELSE excluded.prompt_counter END
WHERE s.fence <= excluded.fence
"""
# $1 kind, $2 row id: a stored row for the vector index to pick up.
VECTOR_QUEUE_INSERT = (
    "INSERT INTO vector_outbox (kind, row_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
)
