"""The Store's search side both SQL backends share: vector outbox, reindex, timelines, lookups.

Statements both backends run are spelled here with numbered placeholders ($1), which SQLite's
connection adapter reads as ?1. A backend gives the statements its dialect spells its own way
(class attributes, positional parameters in the order each comment names), its RowSelects and
its connections; full-text search stays its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, ClassVar

from worker.storage import rows as db
from worker.storage.index_records import (
    ReindexStart,
    RowKind,
    TextFilter,
    TimelineEntry,
    VectorJob,
    VectorRetry,
)
from worker.storage.records import PromptRow, StoredRow
from worker.storage.sql_conn import SqlConn

_KINDS: tuple[tuple[RowKind, str], ...] = (
    ("observation", "observations"),
    ("summary", "summaries"),
)
_TIMELINE_ORDER = {"prompt": 0, "observation": 1, "summary": 2}

_FINISH = (
    "UPDATE vector_outbox SET state = 'done', done_at = $1, last_error = NULL"
    " WHERE kind = $2 AND row_id = $3"
)
_RETRY = (
    "UPDATE vector_outbox SET attempts = attempts + 1, last_error = $1,"
    " next_attempt_at_ms = $2 WHERE kind = $3 AND row_id = $4 AND state = 'pending'"
)
_REINDEX_RUNNING = "SELECT 1 FROM vector_reindex WHERE scope = $1"
_REINDEX_MARK = "INSERT INTO vector_reindex (scope, started_at) VALUES ($1, $2)"
_REINDEX_FORGET = "DELETE FROM vector_reindex WHERE scope = $1"
_TIMELINE_PROMPTS = (
    "SELECT id, created_at, prompt_number, prompt_text FROM user_prompts"
    " WHERE memory_session_id = $1 ORDER BY created_at, id LIMIT $2"
)
# Rows of project $1 (or of every project when it is NULL), as (kind, row_id).
_SCOPE = """
({project} IS NULL
 OR (kind = 'observation' AND row_id IN (SELECT id FROM observations WHERE project = $1))
 OR (kind = 'summary' AND row_id IN (SELECT id FROM summaries WHERE project = $1)))
"""
_SESSION_FENCE = "SELECT fence FROM sessions WHERE memory_session_id = $1"

# Ids follow commit order, which is publish order: one lease holder commits a session's turns.
# A prompt published without a number is stored as 0: its position stands in for it.
_LATEST_PROMPT = """
SELECT CASE WHEN prompt_number > 0 THEN prompt_number
            ELSE (SELECT COUNT(*) FROM user_prompts WHERE memory_session_id = $1) END,
       prompt_text, created_at
FROM user_prompts WHERE memory_session_id = $1 ORDER BY id DESC LIMIT 1
"""


def search_kinds(filters: TextFilter) -> list[RowKind]:
    """The kinds of row a full-text search with these filters can match."""
    if filters.type is None:
        return ["observation", "summary"]
    return ["summary"] if filters.type == "summary" else ["observation"]


def _reindex_scope(project: str | None) -> str:
    return "all" if project is None else f"project:{project}"


class SqlIndexQueries:
    """Mixed into a SQL Store: it supplies the statements, the connections and the clock."""

    _clock: Callable[[], datetime]
    _selects: ClassVar[db.RowSelects]
    # (limit, now_ms, lease_until_ms) -> kind, row_id, attempts of the claimed rows.
    _CLAIM: ClassVar[str]
    # Parameter $1 as the dialect reads a text that may be NULL (PostgreSQL must be told).
    _NULLABLE_TEXT: ClassVar[str]
    # (id list as _id_list gives it) -> the condition on `id` of RowSelects.one_kind.
    _ID_IN: ClassVar[str]

    def _use(self) -> AbstractAsyncContextManager[SqlConn]:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[SqlConn]:
        raise NotImplementedError

    def _id_list(self, ids: list[int]) -> Any:
        """The parameter _ID_IN takes for a list of row ids."""
        raise NotImplementedError

    async def _lock_reindex(self, conn: SqlConn, scope: str) -> None:
        """Serialise concurrent reindex starts of one scope (the transaction may do it)."""

    async def claim_vector_jobs(
        self, *, limit: int, now_ms: int, lease_until_ms: int
    ) -> list[VectorJob]:
        """Claim up to `limit` due outbox rows until `lease_until_ms`, with their stored rows."""
        async with self._transaction() as conn:
            rows = await conn.fetch(self._CLAIM, (limit, now_ms, lease_until_ms))
            claimed: list[tuple[RowKind, int, int]] = sorted(
                (r[0], int(r[1]), int(r[2])) for r in rows
            )
            found = await self._rows_by_keys(conn, [(k, i) for k, i, _ in claimed])
        by_key = {(r.kind, r.id): r for r in found}
        return [VectorJob(kind=k, id=i, attempts=a, row=by_key.get((k, i))) for k, i, a in claimed]

    async def finish_vector_jobs(self, keys: Sequence[tuple[RowKind, int]]) -> None:
        """Mark outbox rows indexed."""
        if not keys:
            return
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            await conn.executemany(_FINISH, [(now, kind, row_id) for kind, row_id in keys])

    async def retry_vector_jobs(self, retries: Sequence[VectorRetry], error: str) -> None:
        """Count a failed attempt on each row and schedule its next one."""
        if not retries:
            return
        async with self._transaction() as conn:
            await conn.executemany(
                _RETRY, [(error[:500], r.next_attempt_at_ms, r.kind, r.id) for r in retries]
            )

    async def start_reindex(self, project: str | None = None) -> ReindexStart:
        """Queue every row (of a project) for indexing again, unless a reindex is unfinished."""
        scope = _reindex_scope(project)
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            await self._lock_reindex(conn, scope)
            running = await conn.fetchrow(_REINDEX_RUNNING, (scope,)) is not None
            if not running:
                # Repair first: every stored row gets an outbox row, whatever happened before.
                for kind, table in _KINDS:
                    await conn.execute(
                        f"INSERT INTO vector_outbox (kind, row_id) SELECT '{kind}', id"
                        f" FROM {table} WHERE {self._NULLABLE_TEXT} IS NULL OR project = $1"
                        " ON CONFLICT DO NOTHING",
                        (project,),
                    )
                await conn.execute(
                    "UPDATE vector_outbox SET state = 'pending', attempts = 0, last_error = NULL,"
                    f" next_attempt_at_ms = 0, done_at = NULL WHERE {self._scope()}",
                    (project,),
                )
                await conn.execute(_REINDEX_MARK, (scope, now))
            pending = await self._count_pending(conn, project)
        return ReindexStart(resumed=running, pending=pending)

    async def finish_reindex(self, project: str | None = None) -> None:
        """Forget the reindex marker: the next reindex starts over."""
        async with self._transaction() as conn:
            await conn.execute(_REINDEX_FORGET, (_reindex_scope(project),))

    async def rows_by_keys(self, keys: Sequence[tuple[RowKind, int]]) -> list[StoredRow]:
        """The stored rows with these (kind, id) keys, in the keys' order; missing ones skipped."""
        async with self._use() as conn:
            found = await self._rows_by_keys(conn, keys)
        by_key = {(r.kind, r.id): r for r in found}
        return [by_key[k] for k in keys if k in by_key]

    async def latest_summary(self, project: str) -> StoredRow | None:
        """The project's newest summary."""
        sql = self._selects.one_kind(
            "summary", "project = $1", "ORDER BY created_at_epoch_ms DESC, id DESC LIMIT 1"
        )
        async with self._use() as conn:
            found = await conn.fetchrow(sql, (project,))
        return None if found is None else db.stored_row(found)

    async def timeline(self, memory_session_id: str, limit: int = 1000) -> list[TimelineEntry]:
        """A session's prompts, observations and summaries in time order (the first `limit`)."""
        rows_sql = self._selects.merged(["memory_session_id = $2"], "$1", newest_first=False)
        async with self._use() as conn:
            prompts = await conn.fetch(_TIMELINE_PROMPTS, (memory_session_id, limit))
            stored = await conn.fetch(rows_sql, (limit, memory_session_id))
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
        entries.sort(key=lambda e: (e.created_at, _TIMELINE_ORDER[e.kind], e.id))
        return entries[:limit]

    async def session_fence(self, memory_session_id: str) -> int | None:
        """The session's stored fencing token, or None for an unknown session."""
        async with self._use() as conn:
            found = await conn.fetchrow(_SESSION_FENCE, (memory_session_id,))
        return None if found is None else int(found[0])

    async def latest_prompt(self, memory_session_id: str) -> PromptRow | None:
        """The session's last stored user request, or None when it has none."""
        async with self._use() as conn:
            found = await conn.fetchrow(_LATEST_PROMPT, (memory_session_id,))
        if found is None:
            return None
        number, text, created_at = found
        return PromptRow(
            prompt_number=int(number),
            prompt_text=text,
            created_at=datetime.fromisoformat(created_at),
        )

    def _scope(self) -> str:
        return _SCOPE.format(project=self._NULLABLE_TEXT)

    async def _count_pending(self, conn: SqlConn, project: str | None) -> int:
        """Outbox rows of the project (of every project when None) not yet indexed."""
        found = await conn.fetchrow(
            f"SELECT COUNT(*) FROM vector_outbox WHERE state = 'pending' AND {self._scope()}",
            (project,),
        )
        assert found is not None  # a COUNT(*) always has its row
        return int(found[0])

    async def _rows_by_keys(
        self, conn: SqlConn, keys: Sequence[tuple[RowKind, int]]
    ) -> list[StoredRow]:
        found: list[StoredRow] = []
        for kind, _table in _KINDS:
            ids = [i for k, i in keys if k == kind]
            if ids:
                sql = self._selects.one_kind(kind, self._ID_IN)
                rows = await conn.fetch(sql, (self._id_list(ids),))
                found.extend(db.stored_row(r) for r in rows)
        return found
