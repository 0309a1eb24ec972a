"""SqliteStore's search side: the vector outbox, full-text search, timelines, lookups by id."""

from __future__ import annotations

from typing import Any

from worker.storage import rows as db
from worker.storage.index_records import RowKind, TextFilter, TextHit
from worker.storage.sql_index import SqlIndexQueries, search_kinds

_SNIPPET = "snippet({table}, -1, '[', ']', '…', 14)"


def _fts_arm(kind: RowKind, filters: TextFilter) -> str:
    table, fts = ("observations", "observations_fts")
    if kind == "summary":
        table, fts = ("summaries", "summaries_fts")
    where = [f"{fts} MATCH :match"]
    if filters.project is not None:
        where.append("t.project = :project")
    if filters.since_ms is not None:
        where.append("t.created_at_epoch_ms >= :since_ms")
    if kind == "observation" and filters.type is not None:
        where.append("t.type = :type")
    return (
        f"SELECT * FROM (SELECT '{kind}', t.id, {fts}.rank, {_SNIPPET.format(table=fts)}"
        f" FROM {fts} JOIN {table} t ON t.id = {fts}.rowid WHERE {' AND '.join(where)}"
        f" ORDER BY {fts}.rank LIMIT :limit)"
    )


class SqliteIndexQueries(SqlIndexQueries):
    """SQLite's statements for the shared search side, and its FTS5 search."""

    _selects = db.SQLITE_SELECTS
    # Numbered placeholders (?1) where a parameter stands more than once.
    _CLAIM = """
UPDATE vector_outbox SET next_attempt_at_ms = ?3
WHERE (kind, row_id) IN (
    SELECT kind, row_id FROM vector_outbox
    WHERE state = 'pending' AND next_attempt_at_ms <= ?2
    ORDER BY next_attempt_at_ms, kind, row_id LIMIT ?1)
RETURNING kind, row_id, attempts
"""
    _NULLABLE_TEXT = "$1"
    _ID_IN = "id IN (SELECT value FROM json_each(?))"

    def _id_list(self, ids: list[int]) -> Any:
        return f"[{','.join(map(str, ids))}]"

    async def vector_lag(self, project: str | None = None) -> int:
        """Outbox rows not yet indexed (of one project, or of all)."""
        async with self._use() as conn:
            if project is not None:
                return await self._count_pending(conn, project)
            # Without a project the scope is left out: the whole outbox is counted on its index.
            found = await conn.fetchrow(
                "SELECT COUNT(*) FROM vector_outbox WHERE state = 'pending'"
            )
        assert found is not None  # a COUNT(*) always has its row
        return int(found[0])

    async def search_text(self, match: str, filters: TextFilter, limit: int) -> list[TextHit]:
        """Full-text matches of an FTS5 `match` expression, best first (bm25)."""
        sql = " UNION ALL ".join(_fts_arm(kind, filters) for kind in search_kinds(filters))
        params: dict[str, Any] = {
            "match": match,
            "limit": limit,
            "project": filters.project,
            "since_ms": filters.since_ms,
            "type": filters.type,
        }
        async with self._use() as conn:
            found = await conn.fetch(f"{sql} ORDER BY 3 LIMIT :limit", params)
        return [TextHit(kind=r[0], id=r[1], bm25=float(r[2]), snippet=r[3] or "") for r in found]
