"""What one SQL backend spells its own way, handed to the shared Store logic as a value.

Statements number their parameters ($1); SQLite's connection adapter reads them as ?1.
Each comment names the parameters in order. The statements both spell alike are written once
(worker/storage/sql/statements.py, listings.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from worker.storage.index_records import TextFilter
from worker.storage.sql.conn import Query
from worker.storage.sql.rows import RowSelects


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """One backend's statements, query builders and list parameters."""

    selects: RowSelects
    # $1 sid -> fence; holds the session row until the transaction ends where the
    # backend needs that (SQLite's BEGIN IMMEDIATE already holds the whole database).
    lock_session_fence: str
    # $1 sid, $2 event ids as list_param gives them, $3 now.
    insert_processed: str
    # $1 sid, $2 event ids as list_param gives them -> event_id.
    select_processed: str
    # A condition on `id` against $1, the ids as list_param gives them.
    id_in: str
    # $1 limit, $2 now_ms, $3 lease_until_ms -> kind, row_id, attempts of the claimed rows.
    claim: str
    # $1 scope: serialises concurrent reindex starts of one scope, or None when the
    # transaction already does.
    lock_reindex: str | None
    # A list of event ids or row ids as one statement parameter.
    list_param: Callable[[Sequence[str] | Sequence[int]], Any]
    # (FTS5 match, filters, limit) -> kind, id, rank (lower is better), snippet; None: no
    # term to search for.
    text_search: Callable[[str, TextFilter, int], Query | None]
