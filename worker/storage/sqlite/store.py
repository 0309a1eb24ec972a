"""The Store on one SQLite file (aiosqlite, WAL): one IMMEDIATE transaction per batch, fenced."""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from worker.storage.protocol import SearchTimeoutError, StoreError
from worker.storage.sql.conn import Params, Row
from worker.storage.sql.store import SqlStore, one_line, utc_now
from worker.storage.sqlite.dialect import SQLITE
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


class SqliteDatabase:
    """One SQLite file through one aiosqlite connection, opened (and migrated) on first use.

    One operation at a time per instance; other instances and processes wait on SQLite's
    busy timeout.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def where(self) -> str:
        """The database file, as error messages name it."""
        return str(self.path)

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""
        async with self._connection() as raw:
            await migrate_schema(raw, self.path)

    async def aclose(self) -> None:
        """Close the connection (the next call opens a new one)."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    @asynccontextmanager
    async def use(self) -> AsyncIterator[SqliteConn]:
        """The open connection, each statement its own transaction."""
        async with self._connection() as raw:
            yield SqliteConn(raw)

    @asynccontextmanager
    async def bounded(self, timeout_s: float) -> AsyncIterator[SqliteConn]:
        """The open connection, its statements interrupted once `timeout_s` have passed."""
        async with self._connection() as raw:
            deadline = time.monotonic() + timeout_s
            # Called every 20 VM steps in aiosqlite's thread (one step may be a long snippet()
            # call, so not every 1,000); True interrupts the statement.
            await raw.set_progress_handler(lambda: time.monotonic() > deadline, 20)
            try:
                yield SqliteConn(raw)
            except sqlite3.OperationalError as e:
                if time.monotonic() <= deadline or "interrupt" not in str(e):
                    raise
                raise SearchTimeoutError(
                    f"search stopped after {timeout_s:g}s (MEMQ_SEARCH_TIMEOUT_S):"
                    " narrow the query (fewer or rarer words)"
                ) from e
            finally:
                await raw.set_progress_handler(None, 0)  # type: ignore[arg-type]  # None clears it

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteConn]:
        """A write transaction that takes SQLite's write lock up front (BEGIN IMMEDIATE);
        a caller cancelled before COMMIT rolls it back."""
        async with self._connection() as raw:
            try:
                # Inside the try: a cancelled BEGIN may still succeed in aiosqlite's thread,
                # and the ROLLBACK queued behind it then ends that transaction.
                await raw.execute("BEGIN IMMEDIATE")
                yield SqliteConn(raw)
                await raw.execute("COMMIT")
            except BaseException:
                await rollback(raw)
                raise

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[aiosqlite.Connection]:
        """The open connection, held exclusively; SQLite errors become StoreError."""
        async with self._lock:
            try:
                yield await self._connected()
            except sqlite3.Error as e:
                raise StoreError(f"SQLite {self.path}: {one_line(e)}") from e

    async def _connected(self) -> aiosqlite.Connection:
        if self._conn is None:
            self._conn = await self._open()
        return self._conn

    async def _open(self) -> aiosqlite.Connection:
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise StoreError(f"memq needs SQLite >= 3.35, this Python has {sqlite3.sqlite_version}")
        try:
            await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the data directory {self.path.parent}: {e.strerror or e}"
            ) from e
        try:
            conn = await aiosqlite.connect(self.path, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open SQLite database {self.path}: {one_line(e)}") from e
        # Rows are read by column name (rows.py), as asyncpg's records are.
        conn.row_factory = sqlite3.Row
        try:
            await configure(conn)
            await migrate_schema(conn, self.path)
        except sqlite3.DatabaseError as e:
            await conn.close()
            raise StoreError(
                f"cannot use {self.path} as a memq SQLite database: {one_line(e)}"
            ) from e
        except BaseException:
            await conn.close()
            raise
        return conn


class SqliteStore(SqlStore):
    """The Store on one SQLite file, shared safely by the worker processes of one machine."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], datetime] = utc_now,
        vector_queue: bool = True,
        search_timeout_s: float | None = None,
    ) -> None:
        self._sqlite = SqliteDatabase(path)
        super().__init__(self._sqlite, SQLITE, clock=clock, vector_queue=vector_queue,
                         search_timeout_s=search_timeout_s)  # fmt: skip

    @property
    def path(self) -> Path:
        """The database file."""
        return self._sqlite.path
