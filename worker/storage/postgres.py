"""The Store on PostgreSQL (asyncpg pool): one transaction per batch, fenced by a row lock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped]

from worker.errors import ConfigError
from worker.storage import postgres_rows as pg
from worker.storage import rows as db
from worker.storage.postgres_index import PostgresIndexQueries
from worker.storage.postgres_schema import migrate_schema
from worker.storage.protocol import (
    IMPORTED_EVENT_PREFIX,
    PRUNE_CHUNK_ROWS,
    StaleFenceError,
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

# The same refusal of foreign records as SQLite's, so both backends answer alike.

_CONNECT_TIMEOUT_S = 10.0
_POOL_MAX = 4


def _utc_now() -> datetime:
    return datetime.now(UTC)


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


class PostgresStore(PostgresIndexQueries):
    """The Store on one PostgreSQL database, shared by the workers of many machines.

    The pool opens (and the schema migrates) on first use; every call takes a pooled
    connection, so one instance serves concurrent callers.
    """

    def __init__(self, url: str, *, clock: Callable[[], datetime] = _utc_now) -> None:
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
        async with self._use() as conn:
            await migrate_schema(conn, self._where)

    async def ping(self) -> None:
        """Raise StoreError when the database is unreachable."""
        async with self._use() as conn:
            await conn.fetchval("SELECT 1")

    async def write_batch(self, batch: BatchWrite) -> BatchResult:
        """Write one turn's records in one transaction; raises StaleFenceError when fenced."""
        check_one_session(batch)
        now = db.iso_utc(batch.occurred_at or self._clock())
        stored: list[StoredRow] = []
        duplicates = 0
        async with self._transaction() as conn:
            await self._claim_session(conn, batch, now)
            if batch.prompts:
                await conn.executemany(pg.INSERT_PROMPT, map(db.prompt_params, batch.prompts))
            for obs in batch.observations:
                row_id = await conn.fetchval(pg.INSERT_OBSERVATION, *db.observation_params(obs))
                if row_id is None:
                    duplicates += 1
                else:
                    stored.append(db.stored_observation(int(row_id), obs))
            for summary in batch.summaries:
                row_id = await conn.fetchval(pg.INSERT_SUMMARY, *db.summary_params(summary))
                stored.append(db.stored_summary(int(row_id), summary))
            # The vector outbox row commits with its row: Chroma is fed from it, never directly.
            if stored:
                await conn.executemany(pg.INSERT_OUTBOX, [(r.kind, r.id) for r in stored])
            if batch.dropped:
                await conn.executemany(pg.INSERT_DROPPED, map(db.dropped_params, batch.dropped))
            if batch.usage:
                await conn.executemany(pg.INSERT_USAGE, map(db.usage_params, batch.usage))
            if batch.event_ids:
                await conn.execute(
                    pg.INSERT_PROCESSED, batch.memory_session_id, batch.event_ids, now
                )
        return BatchResult(stored=stored, deduplicated=duplicates)

    async def processed_event_ids(
        self, memory_session_id: str, event_ids: Sequence[str]
    ) -> set[str]:
        """The subset of event_ids already processed for the session."""
        if not event_ids:
            return set()
        async with self._use() as conn:
            found = await conn.fetch(pg.SELECT_PROCESSED, memory_session_id, list(event_ids))
        return {str(row[0]) for row in found}

    async def prune_processed(self, older_than: datetime) -> int:
        """Forget processed event ids recorded before `older_than` (never imported ones);
        returns how many were deleted."""
        cutoff = db.iso_utc(older_than)
        keep = IMPORTED_EVENT_PREFIX + "%"
        pruned = 0
        while True:
            # One statement (one transaction) per chunk: a large backlog never outlasts the
            # pool's command timeout.
            async with self._use() as conn:
                status = await conn.execute(pg.PRUNE_PROCESSED, cutoff, keep, PRUNE_CHUNK_ROWS)
            deleted = int(status.rsplit(" ", 1)[1])
            pruned += deleted
            if deleted < PRUNE_CHUNK_ROWS:
                return pruned

    async def unannounced(self, limit: int = 500) -> list[StoredRow]:
        """Stored rows not yet announced on pub/sub and the feed, oldest first."""
        sql = pg.select_stored_rows(["announced_at IS NULL"], "$1", newest_first=False)
        async with self._use() as conn:
            found = await conn.fetch(sql, limit)
        return [db.stored_row(row) for row in found]

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
                        now,
                        ids,
                    )

    async def observations(
        self,
        *,
        memory_session_id: str | None = None,
        project: str | None = None,
        limit: int = 50,
    ) -> list[StoredRow]:
        """Newest stored observations and summaries first, optionally filtered."""
        conditions = ["($2::text IS NULL OR memory_session_id = $2)"]
        conditions.append("($3::text IS NULL OR project = $3)")
        sql = pg.select_stored_rows(conditions, "$1", newest_first=True)
        async with self._use() as conn:
            found = await conn.fetch(sql, limit, memory_session_id, project)
        return [db.stored_row(row) for row in found]

    async def sessions(self, *, project: str | None = None, limit: int = 50) -> list[SessionRow]:
        """Sessions with activity, newest first."""
        async with self._use() as conn:
            found = await conn.fetch(pg.SELECT_SESSIONS, limit, project)
        return [db.session_row(row) for row in found]

    async def dropped(self, *, limit: int = 50, include_replayed: bool = False) -> list[DroppedRow]:
        """Kept dropped replies, newest first."""
        async with self._use() as conn:
            found = await conn.fetch(pg.SELECT_DROPPED, limit, include_replayed)
        return [db.dropped_row(row) for row in found]

    async def mark_dropped_replayed(self, dropped_id: int) -> None:
        """Record that a dropped reply was re-parsed and stored."""
        now = db.iso_utc(self._clock())
        async with self._use() as conn:
            status = await conn.execute(
                "UPDATE dropped_outputs SET replayed_at = $1 WHERE id = $2", now, dropped_id
            )
        if status == "UPDATE 0":
            raise StoreError(f"no dropped output with id {dropped_id} in {self._where}")

    async def counts(self) -> StoreCounts:
        """Row counts and token totals."""
        async with self._use() as conn:
            row = await conn.fetchrow(pg.SELECT_COUNTS)
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
        """Close the pool (the next call opens a new one)."""
        async with self._opening:
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.close()

    async def _claim_session(self, conn: Any, batch: BatchWrite, now: str) -> None:
        sid = batch.memory_session_id
        # The row lock serialises the batches of one session across every worker.
        stored_fence = await conn.fetchval(pg.LOCK_SESSION_FENCE, sid)
        if stored_fence is None or stored_fence <= batch.fence:
            prompt_counter = max((p.prompt_number for p in batch.prompts), default=0)
            ended_at = now if batch.ended else None
            status = await conn.execute(
                pg.UPSERT_SESSION, sid, batch.project, batch.fence, now, ended_at, prompt_counter
            )
            if status.endswith(" 1"):
                return
            # A concurrent first batch of the session inserted a higher fence meanwhile.
            stored_fence = await conn.fetchval(pg.LOCK_SESSION_FENCE, sid)
        raise StaleFenceError.refusing(batch, int(stored_fence))

    @asynccontextmanager
    async def _use(self) -> AsyncIterator[Any]:
        """A pooled connection; driver and network errors become one-line StoreErrors."""
        pool = await self._open()
        try:
            async with pool.acquire() as conn:
                yield conn
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as e:
            raise StoreError(f"PostgreSQL {self._where}: {_one_line(e)}") from e

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Any]:
        """A connection inside one transaction, committed when the block ends cleanly."""
        async with self._use() as conn, conn.transaction():
            yield conn

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
            raise StoreError(f"cannot connect to PostgreSQL {self._where}: {_one_line(e)}") from e
        try:
            async with pool.acquire() as conn:
                await migrate_schema(conn, self._where)
        except asyncpg.PostgresError as e:
            await pool.close()
            raise StoreError(f"cannot migrate PostgreSQL {self._where}: {_one_line(e)}") from e
        except BaseException:
            await pool.close()
            raise
        return pool


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
