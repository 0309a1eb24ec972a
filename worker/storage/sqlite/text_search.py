"""SQLite's full-text search: FTS5 tables ranked by bm25, with highlighted snippets."""

from __future__ import annotations

from typing import Any

from worker.storage.index_records import TABLE_OF, RowKind, TextFilter
from worker.storage.sql.conn import Query
from worker.storage.sql.indexing import search_kinds

_SNIPPET = "snippet({table}, -1, '[', ']', '…', 14)"
# FTS5's snippet() is quadratic in a row's hits (16,000 hits of one word: 3.6 s; a stored reply
# of 1.4 MB of `<a>` tags ran for minutes), and SQLite cannot interrupt it mid-row. A row longer
# than this gets the start of its text instead of a highlighted snippet.
SNIPPET_INPUT_CHARS = 24_000
_TEXT_COLUMNS = {
    "observation": ("title", "subtitle", "narrative", "facts", "concepts"),
    "summary": ("request", "investigated", "learned", "completed", "next_steps", "notes"),
}
_PLAIN_START = {"observation": "coalesce(t.narrative, t.title, '')", "summary": "coalesce("
                "t.completed, t.request, t.learned, '')"}  # fmt: skip


def _snippet(kind: RowKind, fts: str) -> str:
    size = " + ".join(f"coalesce(length(t.{c}), 0)" for c in _TEXT_COLUMNS[kind])
    start = f"substr({_PLAIN_START[kind]}, 1, 100) || '…'"
    highlighted = _SNIPPET.format(table=fts)
    return f"CASE WHEN {size} > {SNIPPET_INPUT_CHARS} THEN {start} ELSE {highlighted} END"


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
        f" {_snippet(kind, fts)} AS snippet"
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
