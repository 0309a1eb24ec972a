"""From memq's records to SQL parameters: timestamps, JSON lists, one tuple per INSERT."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from worker.storage.records import (
    DroppedOutput,
    ObservationRecord,
    PromptRecord,
    StoredRow,
    SummaryRecord,
    TokenUsage,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


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


def json_list(values: Sequence[Any]) -> str:
    """A list of strings (or ids) as compact JSON text."""
    return msgspec.json.encode(list(values)).decode()


# Each *_params gives the parameters of the dialect's INSERT, in the order its columns name.


def prompt_params(p: PromptRecord) -> tuple[Any, ...]:
    """Parameters of the prompt INSERT."""
    return (
        p.memory_session_id,
        p.project,
        p.prompt_number,
        p.prompt_text,
        iso_utc(p.created_at),
        p.event_id,
    )


def observation_params(o: ObservationRecord) -> tuple[Any, ...]:
    """Parameters of the observation INSERT (JSON lists as text, the flag as 0/1)."""
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
        msgspec.json.encode(o.file_hashes).decode(),
    )


def summary_params(s: SummaryRecord) -> tuple[Any, ...]:
    """Parameters of the summary INSERT."""
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
    """Parameters of the dropped-output INSERT."""
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
    """Parameters of the token-usage INSERT."""
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
        file_hashes=dict(o.file_hashes) or None,
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
