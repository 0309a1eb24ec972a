"""The Store logic both SQL backends share: replay guard, listings, counts, and the search side.

Shared statements are spelled with numbered placeholders ($1), as in sql_index. A backend
gives the statements its dialect spells its own way (class attributes, positional parameters
in the order each comment names), the queries it builds per call, its connections and its
write path.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from worker.storage import rows as db
from worker.storage.protocol import IMPORTED_EVENT_PREFIX, StoreError, check_one_session
from worker.storage.records import (
    BatchResult,
    BatchWrite,
    DroppedRow,
    SessionRow,
    StoreCounts,
    StoredRow,
)
from worker.storage.sql_conn import Query
from worker.storage.sql_index import SqlIndexQueries

# $1 cutoff (ISO text), $2 LIKE pattern of the ids kept, $3 rows per statement.
_PRUNE_PROCESSED = """
DELETE FROM processed_events WHERE (memory_session_id, event_id) IN (
    SELECT memory_session_id, event_id FROM processed_events
    WHERE processed_at < $1 AND event_id NOT LIKE $2 LIMIT $3
)
"""


def utc_now() -> datetime:
    """The default clock of a Store."""
    return datetime.now(UTC)


def one_line(e: BaseException) -> str:
    """A driver error as one line for a StoreError (its type when it says nothing)."""
    return " ".join(str(e).split()) or type(e).__name__


class SqlStore(SqlIndexQueries):
    """The backend-neutral part of a Store on a SQL database."""

    # The database as error messages name it (no credentials).
    _where: str
    # (memory_session_id, event ids as _list_param gives them) -> event_id.
    _SELECT_PROCESSED: ClassVar[str]
    # () -> the eight StoreCounts fields in order.
    _SELECT_COUNTS: ClassVar[str]

    async def _write_batch(self, batch: BatchWrite, now: str) -> BatchResult:
        """Write a checked batch in one transaction, `now` its sessions' activity time."""
        raise NotImplementedError

    def _list_param(self, values: Sequence[str]) -> Any:
        """The parameter _SELECT_PROCESSED takes for a list of event ids."""
        raise NotImplementedError

    def _observations_query(
        self, memory_session_id: str | None, project: str | None, limit: int
    ) -> Query:
        raise NotImplementedError

    def _sessions_query(self, project: str | None, limit: int) -> Query:
        raise NotImplementedError

    def _dropped_query(self, limit: int, include_replayed: bool) -> Query:
        raise NotImplementedError

    async def ping(self) -> None:
        """Raise StoreError when the database cannot be reached or read."""
        async with self._use() as conn:
            await conn.fetch("SELECT 1")

    async def write_batch(self, batch: BatchWrite) -> BatchResult:
        """Write one turn's records in one transaction; raises StaleFenceError when fenced."""
        check_one_session(batch)
        return await self._write_batch(batch, db.iso_utc(batch.occurred_at or self._clock()))

    async def processed_event_ids(
        self, memory_session_id: str, event_ids: Sequence[str]
    ) -> set[str]:
        """The subset of event_ids already processed for the session."""
        if not event_ids:
            return set()
        params = (memory_session_id, self._list_param(event_ids))
        async with self._use() as conn:
            found = await conn.fetch(self._SELECT_PROCESSED, params)
        return {str(row[0]) for row in found}

    async def _prune_processed(self, older_than: datetime, chunk_rows: int) -> int:
        """Delete processed event ids before `older_than`, `chunk_rows` per statement."""
        params = (db.iso_utc(older_than), IMPORTED_EVENT_PREFIX + "%", chunk_rows)
        pruned = 0
        while True:
            # A transaction per chunk: turns keep committing in between, and a large backlog
            # never outlasts a statement timeout.
            async with self._transaction() as conn:
                deleted = await conn.execute(_PRUNE_PROCESSED, params)
            pruned += deleted
            if deleted < chunk_rows:
                return pruned

    async def unannounced(
        self, limit: int = 500, *, memory_session_id: str | None = None
    ) -> list[StoredRow]:
        """Stored rows not yet announced on pub/sub and the feed, oldest first."""
        conditions = ["announced_at IS NULL"]
        params: list[object] = [limit]
        if memory_session_id is not None:
            conditions.append("memory_session_id = $2")
            params.append(memory_session_id)
        sql = self._selects.merged(conditions, "$1", newest_first=False)
        async with self._use() as conn:
            found = await conn.fetch(sql, params)
        return [db.stored_row(row) for row in found]

    async def observations(
        self,
        *,
        memory_session_id: str | None = None,
        project: str | None = None,
        limit: int = 50,
    ) -> list[StoredRow]:
        """Newest stored observations and summaries first, optionally filtered."""
        sql, params = self._observations_query(memory_session_id, project, limit)
        async with self._use() as conn:
            found = await conn.fetch(sql, params)
        return [db.stored_row(row) for row in found]

    async def sessions(self, *, project: str | None = None, limit: int = 50) -> list[SessionRow]:
        """Sessions with activity, newest first."""
        sql, params = self._sessions_query(project, limit)
        async with self._use() as conn:
            found = await conn.fetch(sql, params)
        return [db.session_row(row) for row in found]

    async def dropped(self, *, limit: int = 50, include_replayed: bool = False) -> list[DroppedRow]:
        """Kept dropped replies, newest first."""
        sql, params = self._dropped_query(limit, include_replayed)
        async with self._use() as conn:
            found = await conn.fetch(sql, params)
        return [db.dropped_row(row) for row in found]

    async def mark_dropped_replayed(self, dropped_id: int) -> None:
        """Record that a dropped reply was re-parsed and stored."""
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            changed = await conn.execute(
                "UPDATE dropped_outputs SET replayed_at = $1 WHERE id = $2", (now, dropped_id)
            )
            if changed == 0:
                raise StoreError(f"no dropped output with id {dropped_id} in {self._where}")

    async def counts(self) -> StoreCounts:
        """Row counts and token totals."""
        async with self._use() as conn:
            row = await conn.fetchrow(self._SELECT_COUNTS)
        assert row is not None  # a SELECT without FROM always has its row
        return StoreCounts(
            sessions=row[0],
            observations=row[1],
            summaries=row[2],
            prompts=row[3],
            dropped_outputs=row[4],
            input_tokens=row[5],
            cached_input_tokens=row[6],
            output_tokens=row[7],
        )
