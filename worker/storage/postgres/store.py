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
from worker.storage import rows as db
from worker.storage.postgres import rows as pg
from worker.storage.postgres.index import PostgresIndexQueries
from worker.storage.postgres.schema import migrate_schema
from worker.storage.protocol import (
    PRUNE_CHUNK_ROWS,
    StaleFenceError,
    StoreError,
)
from worker.storage.records import BatchResult, BatchWrite, StoredRow
from worker.storage.sql_conn import Params, Query, Row
from worker.storage.sql_store import SqlStore, one_line, utc_now

_CONNECT_TIMEOUT_S = 10.0
_POOL_MAX = 4


def describe_url(url: str) -> str:
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


class PostgresStore(PostgresIndexQueries, SqlStore):
    """The Store on one PostgreSQL database, shared by the workers of many machines.

    The pool opens (and the schema migrates) on first use; every call takes a pooled
    connection, so one instance serves concurrent callers.
    """

    _SELECT_PROCESSED = pg.SELECT_PROCESSED
    _SELECT_COUNTS = pg.SELECT_COUNTS

    def __init__(self, url: str, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._url = url
        self._where = describe_url(url)
        self._clock = clock
        self._pool: Any = None
        self._opening = asyncio.Lock()

    @property
    def where(self) -> str:
        """The database as host:port/name (safe to log: no credentials)."""
        return self._where

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""
        async with self._connection() as raw:
            await migrate_schema(raw, self._where)

    async def _write_batch(self, batch: BatchWrite, now: str) -> BatchResult:
        stored: list[StoredRow] = []
        duplicates = 0
        async with self._transaction() as conn:
            await self._claim_session(conn, batch, now)
            if batch.prompts:
                await conn.executemany(pg.INSERT_PROMPT, map(db.prompt_params, batch.prompts))
            for obs in batch.observations:
                new = await conn.fetchrow(pg.INSERT_OBSERVATION, db.observation_params(obs))
                if new is None:
                    duplicates += 1
                else:
                    stored.append(db.stored_observation(int(new[0]), obs))
            for summary in batch.summaries:
                new = await conn.fetchrow(pg.INSERT_SUMMARY, db.summary_params(summary))
                assert new is not None  # RETURNING of a plain INSERT
                stored.append(db.stored_summary(int(new[0]), summary))
            # The vector outbox row commits with its row: Chroma is fed from it, never directly.
            if stored:
                await conn.executemany(pg.INSERT_OUTBOX, [(r.kind, r.id) for r in stored])
            if batch.dropped:
                await conn.executemany(pg.INSERT_DROPPED, map(db.dropped_params, batch.dropped))
            if batch.usage:
                await conn.executemany(pg.INSERT_USAGE, map(db.usage_params, batch.usage))
            if batch.event_ids:
                await conn.execute(
                    pg.INSERT_PROCESSED, (batch.memory_session_id, batch.event_ids, now)
                )
        return BatchResult(stored=stored, deduplicated=duplicates)

    async def prune_processed(self, older_than: datetime) -> int:
        """Forget processed event ids recorded before `older_than` (never imported ones);
        returns how many were deleted."""
        return await self._prune_processed(older_than, PRUNE_CHUNK_ROWS)

    async def mark_announced(self, rows: Sequence[StoredRow]) -> None:
        """Record that these rows were announced."""
        if not rows:
            return
        now = db.iso_utc(self._clock())
        async with self._transaction() as conn:
            for table, kind in (("observations", "observation"), ("summaries", "summary")):
                ids = [r.id for r in rows if r.kind == kind]
                if ids:
                    await conn.execute(
                        f"UPDATE {table} SET announced_at = $1 WHERE announced_at IS NULL"
                        " AND id = ANY($2::bigint[])",
                        (now, ids),
                    )

    async def aclose(self) -> None:
        """Close the pool (the next call opens a new one)."""
        async with self._opening:
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.close()

    def _list_param(self, values: Sequence[str]) -> Any:
        return list(values)

    def _observations_query(
        self, memory_session_id: str | None, project: str | None, limit: int
    ) -> Query:
        conditions = [
            "($2::text IS NULL OR memory_session_id = $2)",
            "($3::text IS NULL OR project = $3)",
        ]
        sql = pg.SELECTS.merged(conditions, "$1", newest_first=True)
        return sql, (limit, memory_session_id, project)

    def _sessions_query(self, project: str | None, limit: int) -> Query:
        return pg.SELECT_SESSIONS, (limit, project)

    def _dropped_query(self, limit: int, include_replayed: bool) -> Query:
        return pg.SELECT_DROPPED, (limit, include_replayed)

    async def _claim_session(self, conn: PostgresConn, batch: BatchWrite, now: str) -> None:
        sid = batch.memory_session_id
        # The row lock serialises the batches of one session across every worker.
        stored_fence = await _fence(conn, sid)
        if stored_fence is None or stored_fence <= batch.fence:
            prompt_counter = max((p.prompt_number for p in batch.prompts), default=0)
            ended_at = now if batch.ended else None
            params = (sid, batch.project, batch.fence, now, ended_at, prompt_counter)
            if await conn.execute(pg.UPSERT_SESSION, params) == 1:
                return
            # A concurrent first batch of the session inserted a higher fence meanwhile.
            stored_fence = await _fence(conn, sid)
        raise StaleFenceError.refusing(batch, int(stored_fence or 0))

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A pooled asyncpg connection; driver and network errors become one-line StoreErrors."""
        pool = await self._open()
        try:
            async with pool.acquire() as raw:
                yield raw
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as e:
            raise StoreError(f"PostgreSQL {self._where}: {one_line(e)}") from e

    @asynccontextmanager
    async def _use(self) -> AsyncIterator[PostgresConn]:
        """A pooled connection, each statement its own transaction."""
        async with self._connection() as raw:
            yield PostgresConn(raw)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[PostgresConn]:
        """A connection inside one transaction, committed when the block ends cleanly."""
        async with self._connection() as raw, raw.transaction():
            yield PostgresConn(raw)

    async def _open(self) -> Any:
        async with self._opening:
            if self._pool is None:
                self._pool = await self._create_pool()
            return self._pool

    async def _create_pool(self) -> Any:
        try:
            pool = await asyncpg.create_pool(
                self._url,
                min_size=1,
                max_size=_POOL_MAX,
                timeout=_CONNECT_TIMEOUT_S,
                command_timeout=60,
            )
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError) as e:
            # TimeoutError is an OSError; ValueError: a URL option asyncpg does not accept.
            raise StoreError(f"cannot connect to PostgreSQL {self._where}: {one_line(e)}") from e
        try:
            async with pool.acquire() as raw:
                await migrate_schema(raw, self._where)
        except asyncpg.PostgresError as e:
            await pool.close()
            raise StoreError(f"cannot migrate PostgreSQL {self._where}: {one_line(e)}") from e
        except BaseException:
            await pool.close()
            raise
        return pool


async def _fence(conn: PostgresConn, sid: str) -> int | None:
    found = await conn.fetchrow(pg.LOCK_SESSION_FENCE, (sid,))
    return None if found is None else int(found[0])
