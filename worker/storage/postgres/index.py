"""PostgresStore's search side: the vector outbox, tsvector search, timelines, lookups by id."""

from __future__ import annotations

from typing import Any

from worker.storage.index_records import RowKind, TextFilter, TextHit
from worker.storage.postgres import rows as pg
from worker.storage.sql_conn import SqlConn
from worker.storage.sql_index import SqlIndexQueries, search_kinds

# NULL for an empty list, which concat_ws skips.
_WORDS = "(SELECT string_agg(w, ' ') FROM jsonb_array_elements_text(t.{col}) AS w)"
_DOCUMENT = {
    "observation": "concat_ws(' … ', t.title, t.subtitle, t.narrative, "
    + f"{_WORDS.format(col='facts')}, {_WORDS.format(col='concepts')})",
    "summary": "concat_ws(' … ', t.request, t.investigated, t.learned, t.completed,"
    " t.next_steps, t.notes)",
}
_TABLE = {"observation": "observations", "summary": "summaries"}
_HEADLINE = "StartSel=[, StopSel=], MaxWords=14, MinWords=5, ShortWord=0, MaxFragments=1"


def _text_arm(kind: RowKind) -> str:
    # $1 tsquery text, $2 limit, $3 project, $4 since_ms, $5 observation type.
    where = [
        "t.search @@ q.q",
        "($3::text IS NULL OR t.project = $3)",
        "($4::bigint IS NULL OR t.created_at_epoch_ms >= $4)",
    ]
    # Summaries match only the type `summary`.
    where.append(
        "($5::text IS NULL OR t.type = $5)"
        if kind == "observation"
        else "($5::text IS NULL OR $5 = 'summary')"
    )
    # Rank inverted so that, as with SQLite's bm25, lower is better.
    return (
        f"SELECT * FROM (SELECT '{kind}'::text AS kind, t.id, -ts_rank(t.search, q.q, 1) AS rank,"
        f" {_DOCUMENT[kind]} AS doc FROM {_TABLE[kind]} t, q WHERE {' AND '.join(where)}"
        " ORDER BY rank, t.id LIMIT $2) AS arm"
    )


class PostgresIndexQueries(SqlIndexQueries):
    """PostgreSQL's statements for the shared search side, and its tsvector search."""

    _selects = pg.SELECTS
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
    _NULLABLE_TEXT = "$1::text"
    _ID_IN = "id = ANY($1::bigint[])"

    def _id_list(self, ids: list[int]) -> Any:
        return ids

    async def _lock_reindex(self, conn: SqlConn, scope: str) -> None:
        # Two `memq reindex` at once: the second waits here, then finds the marker.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", (scope,))

    async def vector_lag(self, project: str | None = None) -> int:
        """Outbox rows not yet indexed (of one project, or of all)."""
        async with self._use() as conn:
            return await self._count_pending(conn, project)

    async def search_text(self, match: str, filters: TextFilter, limit: int) -> list[TextHit]:
        """Full-text matches of an FTS5 `match` expression (as tsquery), best first."""
        query = pg.tsquery_text(match)
        if not query:
            return []
        arms = " UNION ALL ".join(_text_arm(kind) for kind in search_kinds(filters))
        sql = (
            "WITH q AS (SELECT to_tsquery('memq_text', $1) AS q)"
            f" SELECT hit.kind, hit.id, hit.rank, ts_headline('memq_text', hit.doc, q.q,"
            f" '{_HEADLINE}') FROM ({arms}) AS hit, q ORDER BY hit.rank, hit.kind, hit.id LIMIT $2"
        )
        params = (query, limit, filters.project, filters.since_ms, filters.type)
        async with self._use() as conn:
            found = await conn.fetch(sql, params)
        return [TextHit(kind=r[0], id=r[1], bm25=float(r[2]), snippet=r[3] or "") for r in found]
