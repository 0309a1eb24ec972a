"""From memq's records to SQL parameters (timestamps, JSON lists), and to the rows they store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from worker.storage.records import ObservationRow, StoredRow, SummaryRow

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


def as_utc(at: datetime) -> datetime:
    """The time in UTC; a naive datetime is taken to be UTC already, never local time."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def iso_utc(at: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and `Z`, e.g. 2024-05-01T12:00:00.123Z."""
    # isoformat is C code; strftime cost ~4 % of a worker's CPU (three calls a row).
    return as_utc(at).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def epoch_ms(at: datetime) -> int:
    """Milliseconds since the Unix epoch."""
    return (as_utc(at) - _EPOCH) // _ONE_MS


def json_list(values: Sequence[Any]) -> str:
    """A list of strings (or ids) as compact JSON text."""
    return msgspec.json.encode(list(values)).decode()


def column_value(record: msgspec.Struct, column: str) -> Any:
    """A record's parameter for a column of its table, read by name: a time as ISO text (and
    as epoch ms for a `*_epoch_ms` column), a list or mapping as JSON text, the rest as is."""
    if column.endswith("_epoch_ms"):
        return epoch_ms(getattr(record, column.removesuffix("_epoch_ms")))
    value = getattr(record, column)
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, list | dict):
        return msgspec.json.encode(value).decode()
    # A flag stays a bool: PostgreSQL's BOOLEAN takes it, SQLite stores it as 0/1.
    return value


def stored_record(row_id: int, record: ObservationRow | SummaryRow) -> StoredRow:
    """The StoredRow of an observation or summary just inserted with id `row_id`: the
    record's fields by name, its time as stored."""
    fields = msgspec.structs.asdict(record)
    fields["kind"] = "observation" if isinstance(record, ObservationRow) else "summary"
    fields["id"] = row_id
    fields["created_at"] = iso_utc(record.created_at)
    if "file_hashes" in fields:
        # As a stored row reads back (rows.stored_row): no evidence files, no mapping.
        fields["file_hashes"] = fields["file_hashes"] or None
    return msgspec.convert(fields, StoredRow)
