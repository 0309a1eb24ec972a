"""The Store protocols by role (write path, reads, search side, maintenance) and their errors."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from worker.errors import WorkerError
from worker.storage.index_records import (
    ReindexStart,
    RowKind,
    TextFilter,
    TextHit,
    TimelineEntry,
    VectorJob,
    VectorRetry,
)
from worker.storage.records import (
    BatchResult,
    BatchWrite,
    CostDay,
    DroppedRow,
    SessionRow,
    StoreCounts,
    StoredPrompt,
    StoredRow,
)

# `memq import-claude-mem` records every imported row as the processed event
# `claude-mem:<table>:<id>`, and a re-run skips the ones it finds: unlike the worker's
# replay guard those markers must outlive any retention, so pruning keeps them.
IMPORTED_EVENT_PREFIX = "claude-mem:"
# Rows one pruning statement deletes: short transactions, so turn writes wait little.
PRUNE_CHUNK_ROWS = 5000


class StoreError(WorkerError):
    """Storage failed or is unreachable."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached right now (refused, cut off, starting or shutting down):
    a turn waits for it without counting an attempt, unlike a store that answers with errors."""


class SearchTimeoutError(StoreError):
    """A search ran past MEMQ_SEARCH_TIMEOUT_S and was stopped."""


class _SessionRow(Protocol):
    @property
    def memory_session_id(self) -> str: ...


def check_one_session(batch: BatchWrite) -> None:
    """Refuse a batch holding a record of another session (every backend enforces it)."""
    sid = batch.memory_session_id
    lists: tuple[Sequence[_SessionRow], ...] = (
        batch.prompts,
        batch.observations,
        batch.summaries,
        batch.dropped,
        batch.usage,
    )
    for records in lists:
        for record in records:
            if record.memory_session_id != sid:
                raise StoreError(
                    f"a batch for session {sid} holds a record of session"
                    f" {record.memory_session_id}"
                )


class WriteStore(Protocol):
    """The turn's write path: replay guard, fence, restart context, write, announce."""

    async def write_batch(self, batch: BatchWrite) -> BatchResult:
        """Write one turn's records in one transaction; raises LeaseLostError when fenced."""

    async def processed_event_ids(
        self, memory_session_id: str, event_ids: Sequence[str]
    ) -> set[str]:
        """The subset of event_ids already processed for the session."""

    async def session_fence(self, memory_session_id: str) -> int | None:
        """The session's stored fencing token, or None for an unknown session."""

    async def latest_prompt(self, memory_session_id: str) -> StoredPrompt | None:
        """The session's last stored user request, or None when it has none."""

    async def unannounced(
        self, limit: int = 500, *, memory_session_id: str | None = None
    ) -> list[StoredRow]:
        """Stored rows not yet announced on pub/sub and the feed (of one session), oldest first."""

    async def mark_announced(self, rows: Sequence[StoredRow]) -> None:
        """Record that these rows were announced."""


class ReadStore(Protocol):
    """Listings and lookups for the UI, the CLI, Telegram and context injection."""

    async def observations(
        self,
        *,
        memory_session_id: str | None = None,
        project: str | None = None,
        limit: int = 50,
    ) -> list[StoredRow]:
        """Newest stored observations and summaries first, optionally filtered."""

    async def sessions(self, *, project: str | None = None, limit: int = 50) -> list[SessionRow]:
        """Sessions with activity, newest first."""

    async def dropped(self, *, limit: int = 50, include_replayed: bool = False) -> list[DroppedRow]:
        """Kept dropped replies, newest first."""

    async def counts(self) -> StoreCounts:
        """Row counts and token totals."""

    async def cost_by_day(self, days: int = 14) -> list[CostDay]:
        """Observer tokens, calls and stored observations per project and UTC day, oldest
        first, over the last `days` days (today included)."""

    async def rows_by_keys(self, keys: Sequence[tuple[RowKind, int]]) -> list[StoredRow]:
        """The stored rows with these (kind, id) keys, in the keys' order; missing ones skipped."""

    async def latest_summary(self, project: str) -> StoredRow | None:
        """The project's newest summary."""

    async def timeline(self, memory_session_id: str, limit: int = 1000) -> list[TimelineEntry]:
        """A session's prompts, observations and summaries in time order."""


class IndexStore(Protocol):
    """The search side: the vector queue, reindexing and full-text search."""

    async def claim_vector_jobs(
        self, *, limit: int, now_ms: int, lease_until_ms: int
    ) -> list[VectorJob]:
        """Claim up to `limit` due vector-queue rows until `lease_until_ms`, with their rows."""

    async def finish_vector_jobs(self, keys: Sequence[tuple[RowKind, int]]) -> None:
        """Mark vector-queue rows indexed."""

    async def retry_vector_jobs(self, retries: Sequence[VectorRetry], error: str) -> None:
        """Count a failed attempt on each row and schedule its next one."""

    async def vector_lag(self, project: str | None = None) -> int:
        """Outbox rows not yet indexed (of one project, or of all)."""

    async def vector_oldest_pending_ms(self) -> int | None:
        """created_at (epoch ms) of the oldest row not yet indexed; None when none waits."""

    async def start_reindex(self, project: str | None = None) -> ReindexStart:
        """Queue every row (of a project) for indexing again, unless a reindex is unfinished."""

    async def finish_reindex(self, project: str | None = None) -> None:
        """Forget the reindex marker: the next reindex starts over."""

    async def search_text(self, match: str, filters: TextFilter, limit: int) -> list[TextHit]:
        """Full-text matches of an FTS5 `match` expression, best first."""


class Maintenance(Protocol):
    """Housekeeping: pruning the replay guard, marking dropped replies replayed."""

    async def prune_processed(self, older_than: datetime) -> int:
        """Forget processed event ids recorded before `older_than` (never imported ones);
        returns how many were deleted."""

    async def mark_dropped_replayed(self, dropped_id: int) -> None:
        """Record that a dropped reply was re-parsed and stored."""


class Store(WriteStore, ReadStore, IndexStore, Maintenance, Protocol):
    """Durable storage of sessions, observations, summaries and their bookkeeping."""

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""

    async def ping(self) -> None:
        """Raise StoreError when the store is unreachable."""

    async def aclose(self) -> None:
        """Close connections."""
