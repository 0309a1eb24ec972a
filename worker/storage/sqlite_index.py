"""SqliteStore's search side: the vector outbox, full-text search, timelines, lookups by id."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import aiosqlite

from worker.storage import rows as db
from worker.storage.index_records import (
    ReindexStart,
    RowKind,
    TextFilter,
    TextHit,
    TimelineEntry,
    VectorJob,
    VectorRetry,
)
from worker.storage.records import PromptRow, StoredRow

_CLAIM = """
UPDATE vector_outbox SET next_attempt_at_ms = :lease_until
WHERE (kind, row_id) IN (
    SELECT kind, row_id FROM vector_outbox
    WHERE state = 'pending' AND next_attempt_at_ms <= :now
    ORDER BY next_attempt_at_ms, kind, row_id LIMIT :limit)
RETURNING kind, row_id, attempts
"""

# Rows of a project (or of every project when :project is NULL), as (kind, row_id).
_SCOPE = """
(:project IS NULL
 OR (kind = 'observation' AND row_id IN (SELECT id FROM observations WHERE project = :project))
 OR (kind = 'summary' AND row_id IN (SELECT id FROM summaries WHERE project = :project)))
"""

_SNIPPET = "snippet({table}, -1, '[', ']', '…', 14)"


# Ids follow commit order, which is publish order: one lease holder commits a session's turns.
# A prompt published without a number is stored as 0: its position stands in for it.
_LATEST_PROMPT = """
SELECT CASE WHEN prompt_number > 0 THEN prompt_number
            ELSE (SELECT COUNT(*) FROM user_prompts WHERE memory_session_id = :sid) END,
       prompt_text, created_at
FROM user_prompts WHERE memory_session_id = :sid ORDER BY id DESC LIMIT 1
"""


def _reindex_scope(project: str | None) -> str:
    return "all" if project is None else f"project:{project}"


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


class SqliteIndexQueries:
    """Mixed into SqliteStore: it supplies the connection helpers and the clock."""

    _clock: Callable[[], datetime]

    def _use(self) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        raise NotImplementedError

    async def claim_vector_jobs(
        self, *, limit: int, now_ms: int, lease_until_ms: int
    ) -> list[VectorJob]:
        """Claim up to `limit` due outbox rows until `lease_until_ms`, with their stored rows."""
        params = {"limit": limit, "now": now_ms, "lease_until": lease_until_ms}
        async with self._transaction() as conn:
            claimed = list(await conn.execute_fetchall(_CLAIM, params))
            found = await _rows_by_keys(conn, [(r[0], r[1]) for r in claimed])
        by_key = {(r.kind, r.id): r for r in found}
        return [VectorJob(kind=k, id=i, attempts=a, row=by_key.get((k, i))) for k, i, a in claimed]

    async def finish_vector_jobs(self, keys: Sequence[tuple[RowKind, int]]) -> None:
        """Mark outbox rows indexed."""
        if not keys:
            return
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            await conn.executemany(
                "UPDATE vector_outbox SET state = 'done', done_at = ?, last_error = NULL"
                " WHERE kind = ? AND row_id = ?",
                [(now, kind, row_id) for kind, row_id in keys],
            )

    async def retry_vector_jobs(self, retries: Sequence[VectorRetry], error: str) -> None:
        """Count a failed attempt on each row and schedule its next one."""
        if not retries:
            return
        async with self._transaction() as conn:
            await conn.executemany(
                "UPDATE vector_outbox SET attempts = attempts + 1, last_error = ?,"
                " next_attempt_at_ms = ? WHERE kind = ? AND row_id = ? AND state = 'pending'",
                [(error[:500], r.next_attempt_at_ms, r.kind, r.id) for r in retries],
            )

    async def vector_lag(self, project: str | None = None) -> int:
        """Outbox rows not yet indexed (of one project, or of all)."""
        where = "state = 'pending'" + ("" if project is None else f" AND {_SCOPE}")
        async with self._use() as conn:
            ((n,),) = await conn.execute_fetchall(
                f"SELECT COUNT(*) FROM vector_outbox WHERE {where}", {"project": project}
            )
        return int(n)

    async def start_reindex(self, project: str | None = None) -> ReindexStart:
        """Queue every row (of a project) for indexing again, unless a reindex is unfinished."""
        scope = _reindex_scope(project)
        now = db.iso_utc(self._clock())
        params = {"project": project}
        async with self._transaction() as conn:
            running = list(
                await conn.execute_fetchall(
                    "SELECT 1 FROM vector_reindex WHERE scope = ?", (scope,)
                )
            )
            if not running:
                # Repair first: every stored row gets an outbox row, whatever happened before.
                for kind, table in (("observation", "observations"), ("summary", "summaries")):
                    await conn.execute(
                        f"INSERT INTO vector_outbox (kind, row_id) SELECT '{kind}', id"
                        f" FROM {table} WHERE :project IS NULL OR project = :project"
                        " ON CONFLICT DO NOTHING",
                        params,
                    )
                await conn.execute(
                    "UPDATE vector_outbox SET state = 'pending', attempts = 0, last_error = NULL,"
                    f" next_attempt_at_ms = 0, done_at = NULL WHERE {_SCOPE}",
                    params,
                )
                await conn.execute(
                    "INSERT INTO vector_reindex (scope, started_at) VALUES (?, ?)", (scope, now)
                )
            ((pending,),) = await conn.execute_fetchall(
                f"SELECT COUNT(*) FROM vector_outbox WHERE state = 'pending' AND {_SCOPE}", params
            )
        return ReindexStart(resumed=bool(running), pending=int(pending))

    async def finish_reindex(self, project: str | None = None) -> None:
        """Forget the reindex marker: the next reindex starts over."""
        async with self._transaction() as conn:
            await conn.execute(
                "DELETE FROM vector_reindex WHERE scope = ?", (_reindex_scope(project),)
            )

    async def search_text(self, match: str, filters: TextFilter, limit: int) -> list[TextHit]:
        """Full-text matches of an FTS5 `match` expression, best first (bm25)."""
        kinds: list[RowKind] = ["observation", "summary"]
        if filters.type is not None:
            kinds = ["summary"] if filters.type == "summary" else ["observation"]
        sql = " UNION ALL ".join(_fts_arm(kind, filters) for kind in kinds)
        params: dict[str, Any] = {
            "match": match,
            "limit": limit,
            "project": filters.project,
            "since_ms": filters.since_ms,
            "type": filters.type,
        }
        async with self._use() as conn:
            found = await conn.execute_fetchall(f"{sql} ORDER BY 3 LIMIT :limit", params)
        return [TextHit(kind=r[0], id=r[1], bm25=float(r[2]), snippet=r[3] or "") for r in found]

    async def rows_by_keys(self, keys: Sequence[tuple[RowKind, int]]) -> list[StoredRow]:
        """The stored rows with these (kind, id) keys, in the keys' order; missing ones skipped."""
        async with self._use() as conn:
            found = await _rows_by_keys(conn, keys)
        by_key = {(r.kind, r.id): r for r in found}
        return [by_key[k] for k in keys if k in by_key]

    async def latest_summary(self, project: str) -> StoredRow | None:
        """The project's newest summary."""
        sql = db.select_one_kind(
            "summary", "project = ?", "ORDER BY created_at_epoch_ms DESC, id DESC LIMIT 1"
        )
        async with self._use() as conn:
            found = list(await conn.execute_fetchall(sql, (project,)))
        return db.stored_row(found[0]) if found else None

    async def timeline(self, memory_session_id: str, limit: int = 1000) -> list[TimelineEntry]:
        """A session's prompts, observations and summaries in time order (the first `limit`)."""
        sql = db.select_stored_rows(["memory_session_id = :sid"], newest_first=False)
        async with self._use() as conn:
            prompts = await conn.execute_fetchall(
                "SELECT id, created_at, prompt_number, prompt_text FROM user_prompts"
                " WHERE memory_session_id = ? ORDER BY created_at, id LIMIT ?",
                (memory_session_id, limit),
            )
            stored = await conn.execute_fetchall(sql, {"sid": memory_session_id, "limit": limit})
        entries = [
            TimelineEntry(
                kind="prompt", id=p[0], created_at=p[1], prompt_number=p[2], prompt_text=p[3]
            )
            for p in prompts
        ]
        for raw in stored:
            row = db.stored_row(raw)
            entries.append(
                TimelineEntry(
                    kind=row.kind,
                    id=row.id,
                    created_at=row.created_at,
                    prompt_number=row.prompt_number,
                    row=row,
                )
            )
        order = {"prompt": 0, "observation": 1, "summary": 2}
        entries.sort(key=lambda e: (e.created_at, order[e.kind], e.id))
        return entries[:limit]

    async def session_fence(self, memory_session_id: str) -> int | None:
        """The session's stored fencing token, or None for an unknown session."""
        async with self._use() as conn:
            found = list(
                await conn.execute_fetchall(
                    "SELECT fence FROM sessions WHERE memory_session_id = ?", (memory_session_id,)
                )
            )
        return int(found[0][0]) if found else None

    async def latest_prompt(self, memory_session_id: str) -> PromptRow | None:
        """The session's last stored user request, or None when it has none."""
        async with self._use() as conn:
            found = list(await conn.execute_fetchall(_LATEST_PROMPT, {"sid": memory_session_id}))
        if not found:
            return None
        number, text, created_at = found[0]
        return PromptRow(
            prompt_number=int(number),
            prompt_text=text,
            created_at=datetime.fromisoformat(created_at),
        )


async def _rows_by_keys(
    conn: aiosqlite.Connection, keys: Sequence[tuple[RowKind, int]]
) -> list[StoredRow]:
    found: list[StoredRow] = []
    for kind in ("observation", "summary"):
        ids = [i for k, i in keys if k == kind]
        if ids:
            sql = db.select_one_kind(kind, "id IN (SELECT value FROM json_each(?))")
            rows = await conn.execute_fetchall(sql, (f"[{','.join(map(str, ids))}]",))
            found.extend(db.stored_row(r) for r in rows)
    return found
