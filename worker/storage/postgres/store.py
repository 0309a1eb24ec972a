"""The Store on PostgreSQL (asyncpg pool): one transaction per batch, fenced by a row lock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped]

from worker.errors import ConfigError
from worker.storage.outage import reachability
from worker.storage.postgres.dialect import POSTGRES
from worker.storage.postgres.schema import migrate_schema
from worker.storage.protocol import SearchTimeoutError, StoreError, StoreUnavailableError
from worker.storage.sql.conn import Params, Row
from worker.storage.sql.store import SqlStore, one_line, utc_now

_CONNECT_TIMEOUT_S = 10.0
_POOL_MAX = 4
# The server is not there (refused, cut off, starting or shutting down), as opposed to one that
# answers with an error. QueryCanceledError shares the class of the shutdown errors: not it.
_UNAVAILABLE = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
)


def _closed(e: BaseException) -> bool:
    # A server gone mid-transaction surfaces as an InterfaceError on the closed connection
    # ("cannot call Transaction.__aexit__(): the underlying connection is closed"): asyncpg
    # has no type of its own for it, only the message.
    return "connection is closed" in str(e) or "connection was closed" in str(e)


def database_location(url: str) -> str:
    """host:port/database of a postgresql:// URL, never its user or password."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError as e:
        # Never echo the URL: it may carry a password.
        raise ConfigError(
            f"MEMQ_DATABASE_URL is not a valid postgresql:// URL ({e}): use"
            " postgresql://user:password@host:port/database"
        ) from e
    return f"{parts.hostname or 'localhost'}{port}{parts.path or '/'}"


class PostgresConn:
    """An asyncpg connection as the shared Store logic calls it (positional parameters)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    async def fetch(self, sql: str, params: Params = ()) -> Sequence[Row]:
        """Every row the statement returns."""
        rows: Sequence[Row] = await self.raw.fetch(sql, *_positional(params))
        return rows

    async def fetchrow(self, sql: str, params: Params = ()) -> Row | None:
        """The first row the statement returns, or None."""
        row: Row | None = await self.raw.fetchrow(sql, *_positional(params))
        return row

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; how many rows it changed (from its status, e.g. `UPDATE 3`)."""
        status: str = await self.raw.execute(sql, *_positional(params))
        count = status.rsplit(" ", 1)[-1]
        return int(count) if count.isdigit() else 0

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
        await self.raw.executemany(sql, rows)


def _positional(params: Params) -> Sequence[Any]:
    if isinstance(params, Mapping):
        raise TypeError("asyncpg takes positional parameters only")
    return params


class PostgresDatabase:
    """One PostgreSQL database through an asyncpg pool, opened (and migrated) on first use.

    Every call takes a pooled connection, so one instance serves concurrent callers.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self._where = database_location(url)
        self._pool: Any = None
        self._opening = asyncio.Lock()
        self._reach = reachability(self._where)

    @property
    def where(self) -> str:
        """The database as host:port/name (safe to log: no credentials)."""
        return self._where

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""
        async with self._connection() as raw:
            await migrate_schema(raw, self._where)

    async def aclose(self) -> None:
        """Close the pool (the next call opens a new one)."""
        async with self._opening:
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.close()

    @asynccontextmanager
    async def use(self) -> AsyncIterator[PostgresConn]:
        """A pooled connection, each statement its own transaction."""
        async with self._connection() as raw:
            yield PostgresConn(raw)

    @asynccontextmanager
    async def bounded(self, timeout_s: float) -> AsyncIterator[PostgresConn]:
        """A pooled connection in a transaction whose statements stop after `timeout_s`."""
        async with self._connection() as raw, raw.transaction():
            # SET LOCAL: the pooled connection's own timeout comes back with the transaction.
            await raw.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
            try:
                yield PostgresConn(raw)
            except asyncpg.QueryCanceledError as e:
                raise SearchTimeoutError(
                    f"search stopped after {timeout_s:g}s (MEMQ_SEARCH_TIMEOUT_S):"
                    " narrow the query (fewer or rarer words)"
                ) from e

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresConn]:
        """A connection inside one transaction, committed when the block ends cleanly."""
        async with self._connection() as raw, raw.transaction():
            yield PostgresConn(raw)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A pooled asyncpg connection; driver and network errors become one-line StoreErrors."""
        pool = await self._open()
        try:
            async with pool.acquire() as raw:
                yield raw
        except (*_UNAVAILABLE, asyncpg.InterfaceError) as e:
            if isinstance(e, asyncpg.InterfaceError) and not _closed(e):
                raise StoreError(f"PostgreSQL {self._where}: {one_line(e)}") from e
            message = f"PostgreSQL {self._where}: {one_line(e)}"
            self._reach.down(message)
            raise StoreUnavailableError(message) from e
        except asyncpg.PostgresError as e:
            raise StoreError(f"PostgreSQL {self._where}: {one_line(e)}") from e
        self._reach.up()

    async def _open(self) -> Any:
        async with self._opening:
            if self._pool is None:
                self._pool = await self._create_pool()
            return self._pool

    async def _create_pool(self) -> Any:
        try:
            pool = await asyncpg.create_pool(
                self._url,
                # No floor: asyncpg restores one in the background, logging a traceback per
                # try for as long as the server is down.
                min_size=0,
                max_size=_POOL_MAX,
                timeout=_CONNECT_TIMEOUT_S,
                command_timeout=60,
            )
        except _UNAVAILABLE as e:  # TimeoutError is an OSError
            message = f"cannot connect to PostgreSQL {self._where}: {one_line(e)}"
            self._reach.down(message)
            raise StoreUnavailableError(message) from e
        except (asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as e:
            # ValueError: a URL option asyncpg does not accept.
            raise StoreError(f"cannot connect to PostgreSQL {self._where}: {one_line(e)}") from e
        try:
            # The first connection: where an unreachable server or a missing database shows.
            async with pool.acquire() as raw:
                try:
                    await migrate_schema(raw, self._where)
                except _UNAVAILABLE:
                    raise
                except asyncpg.PostgresError as e:
                    message = f"cannot migrate PostgreSQL {self._where}: {one_line(e)}"
                    raise StoreError(message) from e
        except _UNAVAILABLE as e:
            await pool.close()
            message = f"cannot connect to PostgreSQL {self._where}: {one_line(e)}"
            self._reach.down(message)
            raise StoreUnavailableError(message) from e
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as e:
            await pool.close()
            raise StoreError(f"cannot connect to PostgreSQL {self._where}: {one_line(e)}") from e
        except BaseException:
            await pool.close()
            raise
        return pool


class PostgresStore(SqlStore):
    """The Store on one PostgreSQL database, shared by the workers of many machines."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], datetime] = utc_now,
        vector_queue: bool = True,
        search_timeout_s: float | None = None,
    ) -> None:
        self._postgres = PostgresDatabase(url)
        super().__init__(self._postgres, POSTGRES, clock=clock, vector_queue=vector_queue,
                         search_timeout_s=search_timeout_s)  # fmt: skip

    @property
    def where(self) -> str:
        """The database as host:port/name (safe to log: no credentials)."""
        return self._postgres.where
