"""Mapping between memq's records and SQL rows: statements, parameters, timestamps, JSON lists."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from worker.storage.records import (
    DroppedOutput,
    DroppedRow,
    ObservationRecord,
    PromptRecord,
    SessionRow,
    StoredRow,
    SummaryRecord,
    TokenUsage,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_decode_list = msgspec.json.Decoder(list[str])


def _utc(at: datetime) -> datetime:
    # A naive datetime is taken to be UTC already, never local time.
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def iso_utc(at: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and `Z`, e.g. 2024-05-01T12:00:00.123Z."""
    # isoformat is C code; strftime cost ~4 % of a worker's CPU (three calls a row).
    return _utc(at).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def epoch_ms(at: datetime) -> int:
    """Milliseconds since the Unix epoch."""
    return (_utc(at) - _EPOCH) // _ONE_MS


def json_list(values: Sequence[str]) -> str:
    """A list of strings as compact JSON text."""
    return msgspec.json.encode(list(values)).decode()


UPSERT_SESSION = """
INSERT INTO sessions (memory_session_id, project, fence, started_at, last_activity_at,
                      ended_at, prompt_counter)
VALUES (:sid, :project, :fence, :now, :now, :ended_at, :prompt_counter)
ON CONFLICT (memory_session_id) DO UPDATE SET
    project = excluded.project,
    fence = excluded.fence,
    last_activity_at = excluded.last_activity_at,
    ended_at = COALESCE(excluded.ended_at, sessions.ended_at),
    prompt_counter = MAX(sessions.prompt_counter, excluded.prompt_counter)
"""

INSERT_PROMPT = """
INSERT INTO user_prompts (memory_session_id, project, prompt_number, prompt_text, created_at,
                          event_id)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (memory_session_id, event_id) DO NOTHING
"""

INSERT_OBSERVATION = """
INSERT INTO observations (memory_session_id, project, type, title, subtitle, facts, narrative,
    concepts, files_read, files_modified, prompt_number, content_hash, model, type_fallback,
    source_event_ids, created_at, created_at_epoch_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (memory_session_id, content_hash) DO NOTHING
RETURNING id
"""

INSERT_SUMMARY = """
INSERT INTO summaries (memory_session_id, project, request, investigated, learned, completed,
    next_steps, notes, prompt_number, model, created_at, created_at_epoch_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id
"""

INSERT_DROPPED = """
INSERT INTO dropped_outputs (memory_session_id, project, category, raw, event_ids, created_at,
    reason, turn_kind)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""

INSERT_USAGE = """
INSERT INTO token_usage (memory_session_id, project, provider, model, input_tokens,
    cached_input_tokens, output_tokens, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""

INSERT_OUTBOX = """
INSERT INTO vector_outbox (kind, row_id) VALUES (?, ?) ON CONFLICT DO NOTHING
"""

INSERT_PROCESSED = """
INSERT INTO processed_events (memory_session_id, event_id, processed_at) VALUES (?, ?, ?)
ON CONFLICT DO NOTHING
"""


def prompt_params(p: PromptRecord) -> tuple[Any, ...]:
    """Parameters of INSERT_PROMPT."""
    return (
        p.memory_session_id,
        p.project,
        p.prompt_number,
        p.prompt_text,
        iso_utc(p.created_at),
        p.event_id,
    )


def observation_params(o: ObservationRecord) -> tuple[Any, ...]:
    """Parameters of INSERT_OBSERVATION."""
    return (
        o.memory_session_id,
        o.project,
        o.type,
        o.title,
        o.subtitle,
        json_list(o.facts),
        o.narrative,
        json_list(o.concepts),
        json_list(o.files_read),
        json_list(o.files_modified),
        o.prompt_number,
        o.content_hash,
        o.model,
        int(o.type_fallback),
        json_list(o.source_event_ids),
        iso_utc(o.created_at),
        epoch_ms(o.created_at),
    )


def summary_params(s: SummaryRecord) -> tuple[Any, ...]:
    """Parameters of INSERT_SUMMARY."""
    return (
        s.memory_session_id,
        s.project,
        s.request,
        s.investigated,
        s.learned,
        s.completed,
        s.next_steps,
        s.notes,
        s.prompt_number,
        s.model,
        iso_utc(s.created_at),
        epoch_ms(s.created_at),
    )


def dropped_params(d: DroppedOutput) -> tuple[Any, ...]:
    """Parameters of INSERT_DROPPED."""
    return (
        d.memory_session_id,
        d.project,
        d.category,
        d.raw,
        json_list(d.event_ids),
        iso_utc(d.created_at),
        d.reason,
        d.turn_kind,
    )


def usage_params(u: TokenUsage) -> tuple[Any, ...]:
    """Parameters of INSERT_USAGE."""
    return (
        u.memory_session_id,
        u.project,
        u.provider,
        u.model,
        u.input_tokens,
        u.cached_input_tokens,
        u.output_tokens,
        iso_utc(u.created_at),
    )


def stored_observation(row_id: int, o: ObservationRecord) -> StoredRow:
    """The StoredRow of an observation just inserted with id row_id."""
    return StoredRow(
        kind="observation",
        id=row_id,
        memory_session_id=o.memory_session_id,
        project=o.project,
        created_at=iso_utc(o.created_at),
        prompt_number=o.prompt_number,
        type=o.type,
        title=o.title,
        subtitle=o.subtitle,
        facts=list(o.facts),
        narrative=o.narrative,
        concepts=list(o.concepts),
        files_read=list(o.files_read),
        files_modified=list(o.files_modified),
    )


def stored_summary(row_id: int, s: SummaryRecord) -> StoredRow:
    """The StoredRow of a summary just inserted with id row_id."""
    return StoredRow(
        kind="summary",
        id=row_id,
        memory_session_id=s.memory_session_id,
        project=s.project,
        created_at=iso_utc(s.created_at),
        prompt_number=s.prompt_number,
        request=s.request,
        investigated=s.investigated,
        learned=s.learned,
        completed=s.completed,
        next_steps=s.next_steps,
        notes=s.notes,
    )


class RowSelects:
    """SELECTs in the shape stored_row maps, for one backend's spelling of the columns.

    Every `conditions`, `where` and `order` is a fixed SQL fragment (never user text).
    """

    def __init__(self, observation_columns: str, summary_columns: str) -> None:
        self._columns = {"observation": observation_columns, "summary": summary_columns}

    def merged(self, conditions: Sequence[str], limit_param: str, *, newest_first: bool) -> str:
        """Observations and summaries merged in time order, at most `limit_param` (`$1`, `?1`).

        `conditions` are ANDed and applied to both tables.
        """
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        direction = "DESC" if newest_first else "ASC"
        order = f"ORDER BY created_at_epoch_ms {direction}, id {direction}"
        # Each arm is limited on its own index first, so the merge sorts at most twice limit rows.
        return (
            f"SELECT * FROM (SELECT {self._columns['observation']} FROM observations {where}"
            f" {order} LIMIT {limit_param}) AS o"
            f" UNION ALL SELECT * FROM (SELECT {self._columns['summary']} FROM summaries {where}"
            f" {order} LIMIT {limit_param}) AS m {order}, kind {direction} LIMIT {limit_param}"
        )

    def one_kind(self, kind: str, where: str, order: str = "") -> str:
        """Rows of one table (`observation` or `summary`)."""
        table = "observations" if kind == "observation" else "summaries"
        return f"SELECT {self._columns[kind]} FROM {table} WHERE {where} {order}"


# Columns in the order stored_row maps.
SHARED_COLUMNS = "id, memory_session_id, project, created_at, created_at_epoch_ms, prompt_number"
SQLITE_SELECTS = RowSelects(
    f"'observation' AS kind, {SHARED_COLUMNS}, type, title, subtitle, facts, narrative,"
    " concepts, files_read, files_modified, NULL, NULL, NULL, NULL, NULL, NULL",
    f"'summary' AS kind, {SHARED_COLUMNS}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " request, investigated, learned, completed, next_steps, notes",
)


def _list_or_none(text: str | None) -> list[str] | None:
    return None if text is None else _decode_list.decode(text)


def stored_row(row: Sequence[Any]) -> StoredRow:
    """Map a row of a RowSelects query to a StoredRow."""
    return StoredRow(
        kind=row[0],
        id=row[1],
        memory_session_id=row[2],
        project=row[3],
        created_at=row[4],
        prompt_number=row[6],
        type=row[7],
        title=row[8],
        subtitle=row[9],
        facts=_list_or_none(row[10]),
        narrative=row[11],
        concepts=_list_or_none(row[12]),
        files_read=_list_or_none(row[13]),
        files_modified=_list_or_none(row[14]),
        request=row[15],
        investigated=row[16],
        learned=row[17],
        completed=row[18],
        next_steps=row[19],
        notes=row[20],
    )


def session_row(row: Sequence[Any]) -> SessionRow:
    """Map a row of the sessions listing (SQLite's or PostgreSQL's) to a SessionRow."""
    return SessionRow(
        memory_session_id=row[0],
        project=row[1],
        started_at=row[2],
        last_activity_at=row[3],
        ended_at=row[4],
        prompts=row[5],
        observations=row[6],
        summaries=row[7],
    )


def dropped_row(row: Sequence[Any]) -> DroppedRow:
    """Map a row of the dropped-outputs listing to a DroppedRow."""
    return DroppedRow(
        id=row[0],
        memory_session_id=row[1],
        project=row[2],
        category=row[3],
        raw=row[4],
        event_ids=_decode_list.decode(row[5]),
        created_at=row[6],
        reason=row[7],
        turn_kind=row[8],
        replayed_at=row[9],
    )
