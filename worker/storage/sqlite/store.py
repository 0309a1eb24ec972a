"""The Store on one SQLite file (aiosqlite, WAL): one IMMEDIATE transaction per batch, fenced."""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from worker.storage import rows as db
from worker.storage.protocol import PRUNE_CHUNK_ROWS, StoreError
from worker.storage.records import BatchResult, BatchWrite, StoredRow
from worker.storage.sql_conn import Params, Query, Row
from worker.storage.sql_store import SqlStore, one_line, utc_now
from worker.storage.sqlite import batch as batch_writes
from worker.storage.sqlite import queries
from worker.storage.sqlite.batch import in_connection_thread
from worker.storage.sqlite.index import SqliteIndexQueries
from worker.storage.sqlite.schema import configure, migrate_schema, rollback

# RETURNING and UPSERT need SQLite 3.35.
_MIN_SQLITE = (3, 35, 0)


# A numbered placeholder as PostgreSQL spells it; SQLite's spelling of the same is ?1.
_DOLLAR_PARAM = re.compile(r"\$(\d+)")


@functools.lru_cache(maxsize=256)
def _sqlite_spelling(sql: str) -> str:
    return _DOLLAR_PARAM.sub(r"?\1", sql)


class SqliteConn:
    """An aiosqlite connection as the shared Store logic calls it.

    Statements may number their placeholders as the shared ones do ($1); SQLite reads ?1.
    """

    def __init__(self, raw: aiosqlite.Connection) -> None:
        self.raw = raw

    async def fetch(self, sql: str, params: Params = ()) -> Sequence[Row]:
        """Every row the statement returns."""
        return list(await self.raw.execute_fetchall(_sqlite_spelling(sql), params))

    async def fetchrow(self, sql: str, params: Params = ()) -> Row | None:
        """The first row the statement returns, or None."""
        # execute_fetchall: one hop to aiosqlite's thread, where a cursor would take three.
        found = list(await self.raw.execute_fetchall(_sqlite_spelling(sql), params))
        return found[0] if found else None

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; how many rows it changed."""
        cursor = await self.raw.execute(_sqlite_spelling(sql), params)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        await self.raw.executemany(_sqlite_spelling(sql), rows)


class SqliteStore(SqliteIndexQueries, SqlStore):
    """The Store on one SQLite file, shared safely by the worker processes of one machine.

    The connection opens (and the schema migrates) on first use; one instance runs one
    operation at a time, other instances and processes wait on SQLite's busy timeout.
    """

    _SELECT_PROCESSED = (
        "SELECT event_id FROM processed_events WHERE memory_session_id = ?"
        " AND event_id IN (SELECT value FROM json_each(?))"
    )
    _SELECT_COUNTS = queries.SELECT_COUNTS

    def __init__(self, path: Path, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._path = path
        self._where = str(path)
        self._clock = clock
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""
        async with self._connection() as raw:
            await migrate_schema(raw, self._path)

    async def _write_batch(self, batch: BatchWrite, now: str) -> BatchResult:
        async with self._connection() as raw:
            return await in_connection_thread(
                raw, lambda conn, cancelled: batch_writes.write_batch(conn, cancelled, batch, now)
            )

    async def prune_processed(self, older_than: datetime) -> int:
        """Forget processed event ids recorded before `older_than` (never imported ones);
        returns how many were deleted."""
        return await self._prune_processed(older_than, PRUNE_CHUNK_ROWS)

    async def mark_announced(self, rows: Sequence[StoredRow]) -> None:
        """Record that these rows were announced."""
        if not rows:
            return
        now = db.iso_utc(self._clock())
        marked = list(rows)
        async with self._connection() as raw:
            await in_connection_thread(
                raw,
                lambda conn, cancelled: batch_writes.mark_announced(conn, cancelled, marked, now),
            )

    async def aclose(self) -> None:
        """Close the connection (the next call opens a new one)."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    def _list_param(self, values: Sequence[str]) -> Any:
        return db.json_list(values)

    def _observations_query(
        self, memory_session_id: str | None, project: str | None, limit: int
    ) -> Query:
        # Only the filters given: `:sid IS NULL OR …` would keep SQLite off the indexes.
        conditions = []
        if memory_session_id is not None:
            conditions.append("memory_session_id = :sid")
        if project is not None:
            conditions.append("project = :project")
        sql = db.SQLITE_SELECTS.merged(conditions, ":limit", newest_first=True)
        return sql, {"sid": memory_session_id, "project": project, "limit": limit}

    def _sessions_query(self, project: str | None, limit: int) -> Query:
        where = "" if project is None else "WHERE s.project = :project"
        return queries.SELECT_SESSIONS.format(where=where), {"project": project, "limit": limit}

    def _dropped_query(self, limit: int, include_replayed: bool) -> Query:
        where = "" if include_replayed else "WHERE replayed_at IS NULL"
        return queries.SELECT_DROPPED.format(where=where), {"limit": limit}

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[aiosqlite.Connection]:
        """The open connection, held exclusively; SQLite errors become StoreError."""
        async with self._lock:
            try:
                yield await self._connected()
            except sqlite3.Error as e:
                raise StoreError(f"SQLite {self._path}: {one_line(e)}") from e

    @asynccontextmanager
    async def _use(self) -> AsyncIterator[SqliteConn]:
        """The open connection, each statement its own transaction."""
        async with self._connection() as raw:
            yield SqliteConn(raw)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[SqliteConn]:
        """A write transaction that takes SQLite's write lock up front (BEGIN IMMEDIATE)."""
        async with self._connection() as raw:
            try:
                # Inside the try: a cancelled BEGIN may still succeed in aiosqlite's thread.
                await raw.execute("BEGIN IMMEDIATE")
                yield SqliteConn(raw)
                await raw.execute("COMMIT")
            except BaseException:
                await rollback(raw)
                raise

    async def _connected(self) -> aiosqlite.Connection:
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
            raise StoreError(f"cannot open SQLite database {self._path}: {one_line(e)}") from e
        try:
            await configure(conn)
            await migrate_schema(conn, self._path)
        except sqlite3.DatabaseError as e:
            await conn.close()
            raise StoreError(
                f"cannot use {self._path} as a memq SQLite database: {one_line(e)}"
            ) from e
        except BaseException:
            await conn.close()
            raise
        return conn
