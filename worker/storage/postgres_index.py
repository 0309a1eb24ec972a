"""PostgresStore's search side: the vector outbox, tsvector search, timelines, lookups by id."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from worker.storage import postgres_rows as pg
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

# Rows of a project (or of every project when $1 is NULL), as (kind, row_id).
_SCOPE = """
($1::text IS NULL
 OR (kind = 'observation' AND row_id IN (SELECT id FROM observations WHERE project = $1))
 OR (kind = 'summary' AND row_id IN (SELECT id FROM summaries WHERE project = $1)))
"""

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


# Ids follow commit order, which is publish order: one lease holder commits a session's turns.
# A prompt published without a number is stored as 0: its position stands in for it.
_LATEST_PROMPT = """
SELECT CASE WHEN prompt_number > 0 THEN prompt_number
            ELSE (SELECT COUNT(*) FROM user_prompts WHERE memory_session_id = $1) END,
       prompt_text, created_at
FROM user_prompts WHERE memory_session_id = $1 ORDER BY id DESC LIMIT 1
"""


def _reindex_scope(project: str | None) -> str:
    return "all" if project is None else f"project:{project}"


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


class PostgresIndexQueries:
    """Mixed into PostgresStore: it supplies the connection helpers and the clock."""

    _clock: Callable[[], datetime]

    def _use(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def claim_vector_jobs(
        self, *, limit: int, now_ms: int, lease_until_ms: int
    ) -> list[VectorJob]:
        """Claim up to `limit` due outbox rows until `lease_until_ms`, with their stored rows."""
        async with self._transaction() as conn:
            rows = await conn.fetch(_CLAIM, limit, now_ms, lease_until_ms)
            claimed: list[tuple[RowKind, int, int]] = sorted(
                (r[0], int(r[1]), int(r[2])) for r in rows
            )
            found = await _rows_by_keys(conn, [(k, i) for k, i, _ in claimed])
        by_key = {(r.kind, r.id): r for r in found}
        return [VectorJob(kind=k, id=i, attempts=a, row=by_key.get((k, i))) for k, i, a in claimed]

    async def finish_vector_jobs(self, keys: Sequence[tuple[RowKind, int]]) -> None:
        """Mark outbox rows indexed."""
        if not keys:
            return
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            await conn.executemany(
                "UPDATE vector_outbox SET state = 'done', done_at = $1, last_error = NULL"
                " WHERE kind = $2 AND row_id = $3",
                [(now, kind, row_id) for kind, row_id in keys],
            )

    async def retry_vector_jobs(self, retries: Sequence[VectorRetry], error: str) -> None:
        """Count a failed attempt on each row and schedule its next one."""
        if not retries:
            return
        async with self._transaction() as conn:
            await conn.executemany(
                "UPDATE vector_outbox SET attempts = attempts + 1, last_error = $1,"
                " next_attempt_at_ms = $2 WHERE kind = $3 AND row_id = $4 AND state = 'pending'",
                [(error[:500], r.next_attempt_at_ms, r.kind, r.id) for r in retries],
            )

    async def vector_lag(self, project: str | None = None) -> int:
        """Outbox rows not yet indexed (of one project, or of all)."""
        async with self._use() as conn:
            n = await conn.fetchval(
                f"SELECT COUNT(*) FROM vector_outbox WHERE state = 'pending' AND {_SCOPE}", project
            )
        return int(n)

    async def start_reindex(self, project: str | None = None) -> ReindexStart:
        """Queue every row (of a project) for indexing again, unless a reindex is unfinished."""
        scope = _reindex_scope(project)
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            # Two `memq reindex` at once: the second waits here, then finds the marker.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", scope)
            running = await conn.fetchval("SELECT 1 FROM vector_reindex WHERE scope = $1", scope)
            if running is None:
                # Repair first: every stored row gets an outbox row, whatever happened before.
                for kind, table in (("observation", "observations"), ("summary", "summaries")):
                    await conn.execute(
                        f"INSERT INTO vector_outbox (kind, row_id) SELECT '{kind}', id"
                        f" FROM {table} WHERE $1::text IS NULL OR project = $1"
                        " ON CONFLICT DO NOTHING",
                        project,
                    )
                await conn.execute(
                    "UPDATE vector_outbox SET state = 'pending', attempts = 0, last_error = NULL,"
                    f" next_attempt_at_ms = 0, done_at = NULL WHERE {_SCOPE}",
                    project,
                )
                await conn.execute(
                    "INSERT INTO vector_reindex (scope, started_at) VALUES ($1, $2)", scope, now
                )
            pending = await conn.fetchval(
                f"SELECT COUNT(*) FROM vector_outbox WHERE state = 'pending' AND {_SCOPE}",
                project,
            )
        return ReindexStart(resumed=running is not None, pending=int(pending))

    async def finish_reindex(self, project: str | None = None) -> None:
        """Forget the reindex marker: the next reindex starts over."""
        async with self._use() as conn:
            await conn.execute(
                "DELETE FROM vector_reindex WHERE scope = $1", _reindex_scope(project)
            )

    async def search_text(self, match: str, filters: TextFilter, limit: int) -> list[TextHit]:
        """Full-text matches of an FTS5 `match` expression (as tsquery), best first."""
        query = pg.tsquery_text(match)
        if not query:
            return []
        kinds: list[RowKind] = ["observation", "summary"]
        if filters.type is not None:
            kinds = ["summary"] if filters.type == "summary" else ["observation"]
        arms = " UNION ALL ".join(_text_arm(kind) for kind in kinds)
        sql = (
            "WITH q AS (SELECT to_tsquery('memq_text', $1) AS q)"
            f" SELECT hit.kind, hit.id, hit.rank, ts_headline('memq_text', hit.doc, q.q,"
            f" '{_HEADLINE}') FROM ({arms}) AS hit, q ORDER BY hit.rank, hit.kind, hit.id LIMIT $2"
        )
        async with self._use() as conn:
            found = await conn.fetch(
                sql, query, limit, filters.project, filters.since_ms, filters.type
            )
        return [TextHit(kind=r[0], id=r[1], bm25=float(r[2]), snippet=r[3] or "") for r in found]

    async def rows_by_keys(self, keys: Sequence[tuple[RowKind, int]]) -> list[StoredRow]:
        """The stored rows with these (kind, id) keys, in the keys' order; missing ones skipped."""
        async with self._use() as conn:
            found = await _rows_by_keys(conn, keys)
        by_key = {(r.kind, r.id): r for r in found}
        return [by_key[k] for k in keys if k in by_key]

    async def latest_summary(self, project: str) -> StoredRow | None:
        """The project's newest summary."""
        sql = pg.select_one_kind(
            "summary", "project = $1", "ORDER BY created_at_epoch_ms DESC, id DESC LIMIT 1"
        )
        async with self._use() as conn:
            found = await conn.fetchrow(sql, project)
        return None if found is None else db.stored_row(found)

    async def timeline(self, memory_session_id: str, limit: int = 1000) -> list[TimelineEntry]:
        """A session's prompts, observations and summaries in time order (the first `limit`)."""
        sql = pg.select_stored_rows(["memory_session_id = $2"], "$1", newest_first=False)
        async with self._use() as conn:
            prompts = await conn.fetch(
                "SELECT id, created_at, prompt_number, prompt_text FROM user_prompts"
                " WHERE memory_session_id = $1 ORDER BY created_at, id LIMIT $2",
                memory_session_id,
                limit,
            )
            stored = await conn.fetch(sql, limit, memory_session_id)
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
            fence = await conn.fetchval(
                "SELECT fence FROM sessions WHERE memory_session_id = $1", memory_session_id
            )
        return None if fence is None else int(fence)

    async def latest_prompt(self, memory_session_id: str) -> PromptRow | None:
        """The session's last stored user request, or None when it has none."""
        async with self._use() as conn:
            found = await conn.fetchrow(_LATEST_PROMPT, memory_session_id)
        if found is None:
            return None
        number, text, created_at = found
        return PromptRow(
            prompt_number=int(number),
            prompt_text=text,
            created_at=datetime.fromisoformat(created_at),
        )


async def _rows_by_keys(conn: Any, keys: Sequence[tuple[RowKind, int]]) -> list[StoredRow]:
    found: list[StoredRow] = []
    for kind in ("observation", "summary"):
        ids = [i for k, i in keys if k == kind]
        if ids:
            rows = await conn.fetch(pg.select_one_kind(kind, "id = ANY($1::bigint[])"), ids)
            found.extend(db.stored_row(r) for r in rows)
    return found
