"""The Store on one SQLite file (aiosqlite, WAL): one IMMEDIATE transaction per batch, fenced."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite

from worker.storage import rows as db
from worker.storage import sqlite_batch as batch_writes
from worker.storage import sqlite_queries as queries
from worker.storage.protocol import (
    IMPORTED_EVENT_PREFIX,
    PRUNE_CHUNK_ROWS,
    StoreError,
    check_one_session,
)
from worker.storage.records import (
    BatchResult,
    BatchWrite,
    DroppedRow,
    SessionRow,
    StoreCounts,
    StoredRow,
)
from worker.storage.sqlite_batch import in_connection_thread
from worker.storage.sqlite_index import SqliteIndexQueries
from worker.storage.sqlite_schema import configure, migrate_schema, rollback

# RETURNING and UPSERT need SQLite 3.35.
_MIN_SQLITE = (3, 35, 0)

_PRUNE_PROCESSED = """
DELETE FROM processed_events WHERE (memory_session_id, event_id) IN (
    SELECT memory_session_id, event_id FROM processed_events
    WHERE processed_at < ? AND event_id NOT LIKE ? LIMIT ?
)
"""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SqliteStore(SqliteIndexQueries):
    """The Store on one SQLite file, shared safely by the worker processes of one machine.

    The connection opens (and the schema migrates) on first use; one instance runs one
    operation at a time, other instances and processes wait on SQLite's busy timeout.
    """

    def __init__(self, path: Path, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._path = path
        self._clock = clock
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""
        async with self._use() as conn:
            await migrate_schema(conn, self._path)

    async def ping(self) -> None:
        """Raise StoreError when the database cannot be opened or read."""
        async with self._use() as conn:
            await conn.execute_fetchall("SELECT 1")

    async def write_batch(self, batch: BatchWrite) -> BatchResult:
        """Write one turn's records in one transaction; raises StaleFenceError when fenced."""
        check_one_session(batch)
        now = db.iso_utc(batch.occurred_at or self._clock())
        async with self._use() as conn:
            return await in_connection_thread(
                conn, lambda raw, cancelled: batch_writes.write_batch(raw, cancelled, batch, now)
            )

    async def processed_event_ids(
        self, memory_session_id: str, event_ids: Sequence[str]
    ) -> set[str]:
        """The subset of event_ids already processed for the session."""
        if not event_ids:
            return set()
        async with self._use() as conn:
            found = await conn.execute_fetchall(
                "SELECT event_id FROM processed_events WHERE memory_session_id = ?"
                " AND event_id IN (SELECT value FROM json_each(?))",
                (memory_session_id, db.json_list(event_ids)),
            )
        return {row[0] for row in found}

    async def prune_processed(self, older_than: datetime) -> int:
        """Forget processed event ids recorded before `older_than` (never imported ones);
        returns how many were deleted."""
        params = (db.iso_utc(older_than), IMPORTED_EVENT_PREFIX + "%", PRUNE_CHUNK_ROWS)
        pruned = 0
        while True:
            # A transaction per chunk: the write lock (and this store) is free in between,
            # so turns keep committing while a large backlog is pruned.
            async with self._transaction() as conn:
                cursor = await conn.execute(_PRUNE_PROCESSED, params)
                deleted = cursor.rowcount
            pruned += deleted
            if deleted < PRUNE_CHUNK_ROWS:
                return pruned

    async def unannounced(self, limit: int = 500) -> list[StoredRow]:
        """Stored rows not yet announced on pub/sub and the feed, oldest first."""
        sql = db.select_stored_rows(["announced_at IS NULL"], newest_first=False)
        async with self._use() as conn:
            found = await conn.execute_fetchall(sql, {"limit": limit})
        return [db.stored_row(row) for row in found]

    async def mark_announced(self, rows: Sequence[StoredRow]) -> None:
        """Record that these rows were announced."""
        if not rows:
            return
        now = db.iso_utc(self._clock())
        marked = list(rows)
        async with self._use() as conn:
            await in_connection_thread(
                conn,
                lambda raw, cancelled: batch_writes.mark_announced(raw, cancelled, marked, now),
            )

    async def observations(
        self,
        *,
        memory_session_id: str | None = None,
        project: str | None = None,
        limit: int = 50,
    ) -> list[StoredRow]:
        """Newest stored observations and summaries first, optionally filtered."""
        conditions = []
        if memory_session_id is not None:
            conditions.append("memory_session_id = :sid")
        if project is not None:
            conditions.append("project = :project")
        sql = db.select_stored_rows(conditions, newest_first=True)
        params = {"sid": memory_session_id, "project": project, "limit": limit}
        async with self._use() as conn:
            found = await conn.execute_fetchall(sql, params)
        return [db.stored_row(row) for row in found]

    async def sessions(self, *, project: str | None = None, limit: int = 50) -> list[SessionRow]:
        """Sessions with activity, newest first."""
        where = "" if project is None else "WHERE s.project = :project"
        sql = queries.SELECT_SESSIONS.format(where=where)
        async with self._use() as conn:
            found = await conn.execute_fetchall(sql, {"project": project, "limit": limit})
        return [db.session_row(row) for row in found]

    async def dropped(self, *, limit: int = 50, include_replayed: bool = False) -> list[DroppedRow]:
        """Kept dropped replies, newest first."""
        where = "" if include_replayed else "WHERE replayed_at IS NULL"
        sql = queries.SELECT_DROPPED.format(where=where)
        async with self._use() as conn:
            found = await conn.execute_fetchall(sql, {"limit": limit})
        return [db.dropped_row(row) for row in found]

    async def mark_dropped_replayed(self, dropped_id: int) -> None:
        """Record that a dropped reply was re-parsed and stored."""
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            cursor = await conn.execute(
                "UPDATE dropped_outputs SET replayed_at = ? WHERE id = ?", (now, dropped_id)
            )
            if cursor.rowcount == 0:
                raise StoreError(f"no dropped output with id {dropped_id} in {self._path}")

    async def counts(self) -> StoreCounts:
        """Row counts and token totals."""
        async with self._use() as conn:
            (row,) = await conn.execute_fetchall(queries.SELECT_COUNTS)
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

    async def aclose(self) -> None:
        """Close the connection (the next call opens a new one)."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    @asynccontextmanager
    async def _use(self) -> AsyncIterator[aiosqlite.Connection]:
        """The open connection, held exclusively; SQLite errors become StoreError."""
        async with self._lock:
            try:
                yield await self._connection()
            except sqlite3.Error as e:
                raise StoreError(f"SQLite {self._path}: {_one_line(e)}") from e

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """A write transaction that takes SQLite's write lock up front (BEGIN IMMEDIATE)."""
        async with self._use() as conn:
            try:
                # Inside the try: a cancelled BEGIN may still succeed in aiosqlite's thread.
                await conn.execute("BEGIN IMMEDIATE")
                yield conn
                await conn.execute("COMMIT")
            except BaseException:
                await rollback(conn)
                raise

    async def _connection(self) -> aiosqlite.Connection:
        if self._conn is None:
            self._conn = await self._open()
        return self._conn

    async def _open(self) -> aiosqlite.Connection:
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise StoreError(f"memq needs SQLite >= 3.35, this Python has {sqlite3.sqlite_version}")
        try:
            await asyncio.to_thread(self._path.parent.mkdir, parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the data directory {self._path.parent}: {e.strerror or e}"
            ) from e
        try:
            conn = await aiosqlite.connect(self._path, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open SQLite database {self._path}: {_one_line(e)}") from e
        try:
            await configure(conn)
            await migrate_schema(conn, self._path)
        except sqlite3.DatabaseError as e:
            await conn.close()
            raise StoreError(
                f"cannot use {self._path} as a memq SQLite database: {_one_line(e)}"
            ) from e
        except BaseException:
            await conn.close()
            raise
        return conn


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
