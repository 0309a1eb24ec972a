"""SQLite's full-text search: FTS5 tables ranked by bm25, with highlighted snippets."""

from __future__ import annotations

from typing import Any

from worker.storage.index_records import TABLE_OF, RowKind, TextFilter
from worker.storage.sql_conn import Query
from worker.storage.sql_index import search_kinds

_SNIPPET = "snippet({table}, -1, '[', ']', '…', 14)"


def _fts_arm(kind: RowKind, filters: TextFilter) -> str:
    table = TABLE_OF[kind]
    fts = f"{table}_fts"
    where = [f"{fts} MATCH :match"]
    if filters.project is not None:
        where.append("t.project = :project")
    if filters.since_ms is not None:
        where.append("t.created_at_epoch_ms >= :since_ms")
    if kind == "observation" and filters.type is not None:
        where.append("t.type = :type")
    return (
        f"SELECT * FROM (SELECT '{kind}' AS kind, t.id AS id, {fts}.rank AS rank,"
        f" {_SNIPPET.format(table=fts)} AS snippet"
        f" FROM {fts} JOIN {table} t ON t.id = {fts}.rowid WHERE {' AND '.join(where)}"
        f" ORDER BY {fts}.rank LIMIT :limit)"
    )


def text_search(match: str, filters: TextFilter, limit: int) -> Query:
    """The FTS5 query of `match` with these filters: kind, id, rank (bm25), snippet."""
    sql = " UNION ALL ".join(_fts_arm(kind, filters) for kind in search_kinds(filters))
    params: dict[str, Any] = {
        "match": match,
        "limit": limit,
        "project": filters.project,
        "since_ms": filters.since_ms,
        "type": filters.type,
    }
    return f"{sql} ORDER BY 3 LIMIT :limit", params
