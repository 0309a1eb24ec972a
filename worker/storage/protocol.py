"""The Store protocol every storage backend implements (SQLite now, PostgreSQL for fleets)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from worker.errors import WorkerError
from worker.storage.records import (
    BatchResult,
    BatchWrite,
    DroppedRow,
    SessionRow,
    StoreCounts,
    StoredRow,
)


class StoreError(WorkerError):
    """Storage failed or is unreachable."""


class StaleFenceError(StoreError):
    """A write came from a lease holder whose fencing token is no longer current."""


class Store(Protocol):
    """Durable storage of sessions, observations, summaries and their bookkeeping."""

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""

    async def ping(self) -> None:
        """Raise StoreError when the store is unreachable."""

    async def write_batch(self, batch: BatchWrite) -> BatchResult:
        """Write one turn's records in one transaction; raises StaleFenceError when fenced."""

    async def processed_event_ids(
        self, memory_session_id: str, event_ids: Sequence[str]
    ) -> set[str]:
        """The subset of event_ids already processed for the session."""

    async def unannounced(self, limit: int = 500) -> list[StoredRow]:
        """Stored rows not yet announced on pub/sub and the feed, oldest first."""

    async def mark_announced(self, rows: Sequence[StoredRow]) -> None:
        """Record that these rows were announced."""

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

    async def mark_dropped_replayed(self, dropped_id: int) -> None:
        """Record that a dropped reply was re-parsed and stored."""

    async def counts(self) -> StoreCounts:
        """Row counts and token totals."""

    async def aclose(self) -> None:
        """Close connections."""
