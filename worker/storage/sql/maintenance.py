"""Maintenance on a SQL database: pruning the replay guard, marking dropped replies replayed."""

from __future__ import annotations

from worker.storage.protocol import IMPORTED_EVENT_PREFIX, PRUNE_CHUNK_ROWS, StoreError
from worker.storage.sql.conn import SqlDatabase

# $1 cutoff (ISO text), $2 LIKE pattern of the ids kept, $3 rows per statement.
_PRUNE_PROCESSED = """
DELETE FROM processed_events WHERE (memory_session_id, event_id) IN (
    SELECT memory_session_id, event_id FROM processed_events
    WHERE processed_at < $1 AND event_id NOT LIKE $2 LIMIT $3
)
"""
_MARK_REPLAYED = "UPDATE dropped_outputs SET replayed_at = $1 WHERE id = $2"


async def prune_processed(db: SqlDatabase, cutoff: str) -> int:
    """Delete processed event ids recorded before `cutoff` (ISO), never imported ones."""
    chunk_rows = PRUNE_CHUNK_ROWS
    values = (cutoff, IMPORTED_EVENT_PREFIX + "%", chunk_rows)
    pruned = 0
    while True:
        # A transaction per chunk: turns keep committing in between, and a large backlog
        # never outlasts a statement timeout.
        async with db.transaction() as conn:
            deleted = await conn.execute(_PRUNE_PROCESSED, values)
        pruned += deleted
        if deleted < chunk_rows:
            return pruned


async def mark_dropped_replayed(db: SqlDatabase, dropped_id: int, now: str) -> None:
    """Record that a dropped reply was re-parsed and stored."""
    async with db.transaction() as conn:
        if await conn.execute(_MARK_REPLAYED, (now, dropped_id)) == 0:
            raise StoreError(f"no dropped output with id {dropped_id} in {db.where}")
