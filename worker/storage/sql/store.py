"""The Store on a SQL database: a backend's connections and dialect, composed with the shared
logic of each role (writes, reads, indexing, maintenance)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from worker.storage import index_records, records
from worker.storage.protocol import check_one_session
from worker.storage.sql import indexing, maintenance, reads, writes
from worker.storage.sql.conn import SqlDatabase
from worker.storage.sql.dialect import Dialect
from worker.storage.sql.params import iso_utc


def utc_now() -> datetime:
    """The default clock of a Store."""
    return datetime.now(UTC)


def one_line(e: BaseException) -> str:
    """A driver error as one line for a StoreError (its type when it says nothing)."""
    return " ".join(str(e).split()) or type(e).__name__


class SqlStore:
    """Every Store role on one SQL database; `vector_queue` False (MEMQ_CHROMA=off) queues
    no stored row for the vector index (`memq reindex` queues them all once it is on)."""

    def __init__(
        self,
        db: SqlDatabase,
        dialect: Dialect,
        *,
        clock: Callable[[], datetime] = utc_now,
        vector_queue: bool = True,
        search_timeout_s: float | None = None,
    ) -> None:
        self._db = db
        self._search_timeout_s = search_timeout_s
        self._dialect = dialect
        self._clock = clock
        self._vector_queue = vector_queue

    def _now(self) -> str:
        return iso_utc(self._clock())

    # Lifecycle.

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""
        await self._db.migrate()

    async def ping(self) -> None:
        """Raise StoreError when the database cannot be reached or read."""
        async with self._db.use() as conn:
            await conn.fetch("SELECT 1")

    async def aclose(self) -> None:
        """Close the connections (the next call opens new ones)."""
        await self._db.aclose()

    # WriteStore.

    async def write_batch(self, batch: records.BatchWrite) -> records.BatchResult:
        """Write one turn's records in one transaction; raises LeaseLostError when fenced."""
        check_one_session(batch)
        now = iso_utc(batch.occurred_at or self._clock())
        return await writes.write_batch(
            self._db, self._dialect, batch, now, vector_queue=self._vector_queue
        )

    async def processed_event_ids(
        self, memory_session_id: str, event_ids: Sequence[str]
    ) -> set[str]:
        """The subset of event_ids already processed for the session."""
        return await reads.processed_event_ids(
            self._db, self._dialect, memory_session_id, event_ids
        )

    async def session_fence(self, memory_session_id: str) -> int | None:
        """The session's stored fencing token, or None for an unknown session."""
        return await reads.session_fence(self._db, memory_session_id)

    async def latest_prompt(self, memory_session_id: str) -> records.StoredPrompt | None:
        """The session's last stored user request, or None when it has none."""
        return await reads.latest_prompt(self._db, memory_session_id)

    async def unannounced(
        self, limit: int = 500, *, memory_session_id: str | None = None
    ) -> list[records.StoredRow]:
        """Stored rows not yet announced on pub/sub and the feed (of one session), oldest first."""
        return await reads.unannounced(self._db, self._dialect, limit, memory_session_id)

    async def mark_announced(self, rows: Sequence[records.StoredRow]) -> None:
        """Record that these rows were announced."""
        if rows:
            await writes.mark_announced(self._db, self._dialect, rows, self._now())

    # ReadStore.

    async def observations(
        self,
        *,
        memory_session_id: str | None = None,
        project: str | None = None,
        limit: int = 50,
    ) -> list[records.StoredRow]:
        """Newest stored observations and summaries first, optionally filtered."""
        return await reads.observations(self._db, self._dialect, memory_session_id, project, limit)

    async def sessions(
        self, *, project: str | None = None, limit: int = 50
    ) -> list[records.SessionRow]:
        """Sessions with activity, newest first."""
        return await reads.sessions(self._db, project, limit)

    async def dropped(
        self, *, limit: int = 50, include_replayed: bool = False
    ) -> list[records.DroppedRow]:
        """Kept dropped replies, newest first."""
        return await reads.dropped(self._db, limit, include_replayed)

    async def counts(self) -> records.StoreCounts:
        """Row counts and token totals."""
        return await reads.counts(self._db)

    async def cost_by_day(self, days: int = 14) -> list[records.CostDay]:
        """Observer tokens, calls and stored observations per project and UTC day, oldest
        first, over the last `days` days (today included)."""
        return await reads.cost_by_day(self._db, self._clock(), days)

    async def rows_by_keys(
        self, keys: Sequence[tuple[index_records.RowKind, int]]
    ) -> list[records.StoredRow]:
        """The stored rows with these (kind, id) keys, in the keys' order; missing ones skipped."""
        return await reads.rows_by_keys(self._db, self._dialect, keys)

    async def latest_summary(self, project: str) -> records.StoredRow | None:
        """The project's newest summary."""
        return await reads.latest_summary(self._db, self._dialect, project)

    async def timeline(
        self, memory_session_id: str, limit: int = 1000
    ) -> list[index_records.TimelineEntry]:
        """A session's prompts, observations and summaries in time order (the first `limit`)."""
        return await reads.timeline(self._db, self._dialect, memory_session_id, limit)

    # IndexStore.

    async def claim_vector_jobs(
        self, *, limit: int, now_ms: int, lease_until_ms: int
    ) -> list[index_records.VectorJob]:
        """Claim up to `limit` due vector-queue rows until `lease_until_ms`, with their rows."""
        return await indexing.claim_vector_jobs(
            self._db, self._dialect, limit=limit, now_ms=now_ms, lease_until_ms=lease_until_ms
        )

    async def finish_vector_jobs(self, keys: Sequence[tuple[index_records.RowKind, int]]) -> None:
        """Mark vector-queue rows indexed."""
        await indexing.finish_vector_jobs(self._db, keys, self._now())

    async def retry_vector_jobs(
        self, retries: Sequence[index_records.VectorRetry], error: str
    ) -> None:
        """Count a failed attempt on each row and schedule its next one."""
        await indexing.retry_vector_jobs(self._db, retries, error)

    async def vector_lag(self, project: str | None = None) -> int:
        """Outbox rows not yet indexed (of one project, or of all)."""
        return await indexing.vector_lag(self._db, project)

    async def vector_oldest_pending_ms(self) -> int | None:
        """created_at (epoch ms) of the oldest row not yet indexed; None when none waits."""
        return await indexing.vector_oldest_pending_ms(self._db)

    async def start_reindex(self, project: str | None = None) -> index_records.ReindexStart:
        """Queue every row (of a project) for indexing again, unless a reindex is unfinished."""
        return await indexing.start_reindex(self._db, self._dialect, project, self._now())

    async def finish_reindex(self, project: str | None = None) -> None:
        """Forget the reindex marker: the next reindex starts over."""
        await indexing.finish_reindex(self._db, project)

    async def search_text(
        self, match: str, filters: index_records.TextFilter, limit: int
    ) -> list[index_records.TextHit]:
        """Full-text matches of an FTS5 `match` expression, best first (stopped after the
        store's search timeout, when it has one)."""
        return await indexing.search_text(
            self._db, self._dialect, match, filters, limit, self._search_timeout_s
        )

    # Maintenance.

    async def prune_processed(self, older_than: datetime) -> int:
        """Forget processed event ids recorded before `older_than` (never imported ones);
        returns how many were deleted."""
        return await maintenance.prune_processed(self._db, iso_utc(older_than))

    async def mark_dropped_replayed(self, dropped_id: int) -> None:
        """Record that a dropped reply was re-parsed and stored."""
        await maintenance.mark_dropped_replayed(self._db, dropped_id, self._now())
