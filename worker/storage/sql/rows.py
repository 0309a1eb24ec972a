"""From SQL rows to memq's records, by column name: one mapping per row type for both backends."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from worker.storage.index_records import TABLE_OF, RowKind
from worker.storage.records import CostDay, DroppedRow, SessionRow, StoreCounts, StoredRow
from worker.storage.sql.conn import Row

T = TypeVar("T")
_decode_list = msgspec.json.Decoder(list[str])
_decode_hashes = msgspec.json.Decoder(dict[str, str | None])

_SHARED_COLUMNS = ("id", "memory_session_id", "project", "created_at", "created_at_epoch_ms")
_OBSERVATION_COLUMNS = (
    "type",
    "title",
    "subtitle",
    "facts",
    "narrative",
    "concepts",
    "files_read",
    "files_modified",
    "file_hashes",
)
_SUMMARY_COLUMNS = ("request", "investigated", "learned", "completed", "next_steps", "notes")
# Stored as JSON (lists, and file_hashes a mapping); selected as text, decoded by stored_row.
_JSON_COLUMNS = frozenset({"facts", "concepts", "files_read", "files_modified", "file_hashes"})


class RowSelects:
    """SELECTs of the columns stored_row reads, in one backend's spelling.

    Every `conditions`, `where` and `order` is a fixed SQL fragment (never user text).
    """

    def __init__(self, text_cast: str = "") -> None:
        # `text_cast` (PostgreSQL's ::text) types the kind literal, the other kind's NULL
        # columns and the JSON lists, which UNION ALL and the decoder need as text.
        def columns(kind: str, other: tuple[str, ...]) -> str:
            spelled = [f"'{kind}'{text_cast} AS kind", *_SHARED_COLUMNS, "prompt_number"]
            for column in _OBSERVATION_COLUMNS + _SUMMARY_COLUMNS:
                if column in other:
                    spelled.append(f"NULL{text_cast} AS {column}")
                elif column in _JSON_COLUMNS:
                    spelled.append(f"{column}{text_cast} AS {column}")
                else:
                    spelled.append(column)
            return ", ".join(spelled)

        self._columns = {
            "observation": columns("observation", _SUMMARY_COLUMNS),
            "summary": columns("summary", _OBSERVATION_COLUMNS),
        }

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

    def one_kind(self, kind: RowKind, where: str, order: str = "") -> str:
        """Rows of one table (`observation` or `summary`)."""
        return f"SELECT {self._columns[kind]} FROM {TABLE_OF[kind]} WHERE {where} {order}"


def _list_or_none(text: str | None) -> list[str] | None:
    return None if text is None else _decode_list.decode(text)


def _hashes_or_none(text: str | None) -> dict[str, str | None] | None:
    return (_decode_hashes.decode(text) or None) if text is not None else None


# Columns read as JSON text, decoded before the record is built from the row.
_STORED_JSON: dict[str, Callable[[Any], Any]] = {
    column: _list_or_none for column in _JSON_COLUMNS - {"file_hashes"}
} | {"file_hashes": _hashes_or_none}
_DROPPED_JSON: dict[str, Callable[[Any], Any]] = {"event_ids": _decode_list.decode}


def stored_row(row: Row) -> StoredRow:
    """Map a row of a RowSelects query to a StoredRow."""
    return by_name(row, StoredRow, _STORED_JSON)


def session_row(row: Row) -> SessionRow:
    """Map a row of the sessions listing to a SessionRow."""
    return by_name(row, SessionRow)


def dropped_row(row: Row) -> DroppedRow:
    """Map a row of the dropped-outputs listing to a DroppedRow."""
    return by_name(row, DroppedRow, _DROPPED_JSON)


def store_counts(row: Row) -> StoreCounts:
    """Map the row of the counts query to StoreCounts."""
    return by_name(row, StoreCounts)


def cost_day(row: Row) -> CostDay:
    """Map a row of the calls-by-day query to CostDay (its observations counted apart)."""
    return by_name(row, CostDay)


def by_name(row: Row, kind: type[T], decode: Mapping[str, Callable[[Any], Any]] | None = None) -> T:
    """A record whose fields are the row's columns, matched by name (numbers as numbers),
    the columns in `decode` passed through their decoder first; other columns are ignored."""
    # Not `for column in row`: iterating a sqlite3.Row gives its values, not its columns.
    columns = {column: row[column] for column in row.keys()}  # noqa: SIM118
    for column, decoder in (decode or {}).items():
        columns[column] = decoder(columns[column])
    return msgspec.convert(columns, kind, strict=False)
