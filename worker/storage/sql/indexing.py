"""The search side on a SQL database: the vector queue, reindexing, full-text search."""

from __future__ import annotations

from collections.abc import Sequence

from worker.storage.index_records import (
    TABLE_OF,
    ReindexStart,
    RowKind,
    TextFilter,
    TextHit,
    VectorJob,
    VectorRetry,
)
from worker.storage.sql.conn import SqlConn, SqlDatabase
from worker.storage.sql.dialect import Dialect
from worker.storage.sql.reads import fetch_by_keys

_FINISH = (
    "UPDATE vector_outbox SET state = 'done', done_at = $1, last_error = NULL"
    " WHERE kind = $2 AND row_id = $3"
)
_RETRY = (
    "UPDATE vector_outbox SET attempts = attempts + 1, last_error = $1,"
    " next_attempt_at_ms = $2 WHERE kind = $3 AND row_id = $4 AND state = 'pending'"
)
_PENDING = "SELECT COUNT(*) AS pending FROM vector_outbox WHERE state = 'pending'"
# When the oldest row still waiting was stored (its kind's table has the time, not the outbox).
_OLDEST_PENDING = """
SELECT MIN(t.created_at_epoch_ms) AS oldest FROM (
  SELECT o.created_at_epoch_ms FROM vector_outbox v JOIN observations o ON o.id = v.row_id
  WHERE v.state = 'pending' AND v.kind = 'observation'
  UNION ALL
  SELECT s.created_at_epoch_ms FROM vector_outbox v JOIN summaries s ON s.id = v.row_id
  WHERE v.state = 'pending' AND v.kind = 'summary'
) t"""
_REINDEX_RUNNING = "SELECT 1 FROM vector_reindex WHERE scope = $1"
_REINDEX_MARK = "INSERT INTO vector_reindex (scope, started_at) VALUES ($1, $2)"
_REINDEX_FORGET = "DELETE FROM vector_reindex WHERE scope = $1"
# $1 typed for a comparison with NULL, which PostgreSQL cannot infer from the value alone.
_NULLABLE_PROJECT = "CAST($1 AS TEXT)"
# Rows of project $1 (or of every project when it is NULL), as (kind, row_id).
_SCOPE = f"""
({_NULLABLE_PROJECT} IS NULL
 OR (kind = 'observation' AND row_id IN (SELECT id FROM observations WHERE project = $1))
 OR (kind = 'summary' AND row_id IN (SELECT id FROM summaries WHERE project = $1)))
"""


def search_kinds(filters: TextFilter) -> list[RowKind]:
    """The kinds of row a full-text search with these filters can match."""
    if filters.type is None:
        return ["observation", "summary"]
    return ["summary"] if filters.type == "summary" else ["observation"]


def _reindex_scope(project: str | None) -> str:
    return "all" if project is None else f"project:{project}"


async def claim_vector_jobs(
    db: SqlDatabase, dialect: Dialect, *, limit: int, now_ms: int, lease_until_ms: int
) -> list[VectorJob]:
    """Claim up to `limit` due vector-queue rows until `lease_until_ms`, with their stored rows."""
    async with db.transaction() as conn:
        rows = await conn.fetch(dialect.claim, (limit, now_ms, lease_until_ms))
        claimed: list[tuple[RowKind, int, int]] = sorted(
            (r["kind"], int(r["row_id"]), int(r["attempts"])) for r in rows
        )
        found = await fetch_by_keys(conn, dialect, [(k, i) for k, i, _ in claimed])
    by_key = {(r.kind, r.id): r for r in found}
    return [VectorJob(kind=k, id=i, attempts=a, row=by_key.get((k, i))) for k, i, a in claimed]


async def finish_vector_jobs(
    db: SqlDatabase, keys: Sequence[tuple[RowKind, int]], now: str
) -> None:
    """Mark vector-queue rows indexed."""
    if not keys:
        return
    async with db.transaction() as conn:
        await conn.executemany(_FINISH, [(now, kind, row_id) for kind, row_id in keys])


async def retry_vector_jobs(db: SqlDatabase, retries: Sequence[VectorRetry], error: str) -> None:
    """Count a failed attempt on each row and schedule its next one."""
    if not retries:
        return
    async with db.transaction() as conn:
        await conn.executemany(
            _RETRY, [(error[:500], r.next_attempt_at_ms, r.kind, r.id) for r in retries]
        )


async def vector_lag(db: SqlDatabase, project: str | None) -> int:
    """Outbox rows not yet indexed (of one project, or of all)."""
    async with db.use() as conn:
        if project is not None:
            return await _count_pending(conn, project)
        # Without a project the scope is left out: the whole vector queue is counted on its index.
        found = await conn.fetchrow(_PENDING)
    assert found is not None  # a COUNT(*) always has its row
    return int(found["pending"])


async def vector_oldest_pending_ms(db: SqlDatabase) -> int | None:
    """created_at (epoch ms) of the oldest row not yet indexed; None when none waits."""
    async with db.use() as conn:
        found = await conn.fetchrow(_OLDEST_PENDING)
    return None if found is None or found["oldest"] is None else int(found["oldest"])


async def start_reindex(
    db: SqlDatabase, dialect: Dialect, project: str | None, now: str
) -> ReindexStart:
    """Queue every row (of a project) for indexing again, unless a reindex is unfinished."""
    scope = _reindex_scope(project)
    async with db.transaction() as conn:
        if dialect.lock_reindex is not None:
            # Two `memq reindex` at once: the second waits here, then finds the marker.
            await conn.execute(dialect.lock_reindex, (scope,))
        running = await conn.fetchrow(_REINDEX_RUNNING, (scope,)) is not None
        if not running:
            # Repair first: every stored row gets a vector-queue row, whatever happened before.
            for kind, table in TABLE_OF.items():
                await conn.execute(
                    f"INSERT INTO vector_outbox (kind, row_id) SELECT '{kind}', id"
                    f" FROM {table} WHERE {_NULLABLE_PROJECT} IS NULL OR project = $1"
                    " ON CONFLICT DO NOTHING",
                    (project,),
                )
            await conn.execute(
                "UPDATE vector_outbox SET state = 'pending', attempts = 0, last_error = NULL,"
                f" next_attempt_at_ms = 0, done_at = NULL WHERE {_SCOPE}",
                (project,),
            )
            await conn.execute(_REINDEX_MARK, (scope, now))
        pending = await _count_pending(conn, project)
    return ReindexStart(resumed=running, pending=pending)


async def finish_reindex(db: SqlDatabase, project: str | None) -> None:
    """Forget the reindex marker: the next reindex starts over."""
    async with db.transaction() as conn:
        await conn.execute(_REINDEX_FORGET, (_reindex_scope(project),))


async def search_text(
    db: SqlDatabase, dialect: Dialect, match: str, filters: TextFilter, limit: int,
    timeout_s: float | None = None,
) -> list[TextHit]:  # fmt: skip
    """Full-text matches of an FTS5 `match` expression, best first; with `timeout_s`, stopped
    (SearchTimeoutError) when it runs longer."""
    query = dialect.text_search(match, filters, limit)
    if query is None:
        return []
    async with db.bounded(timeout_s) if timeout_s else db.use() as conn:
        found = await conn.fetch(*query)
    return [
        TextHit(kind=r["kind"], id=r["id"], bm25=float(r["rank"]), snippet=r["snippet"] or "")
        for r in found
    ]


async def _count_pending(conn: SqlConn, project: str | None) -> int:
    """Outbox rows of the project (of every project when None) not yet indexed."""
    found = await conn.fetchrow(f"{_PENDING} AND {_SCOPE}", (project,))
    assert found is not None  # a COUNT(*) always has its row
    return int(found["pending"])
