"""The turn's write path on a SQL database: one fenced transaction per batch, then announcing."""

from __future__ import annotations

from collections.abc import Sequence

from worker.errors import LeaseLostError
from worker.storage.index_records import TABLE_OF
from worker.storage.records import BatchResult, BatchWrite, StoredRow
from worker.storage.sql import params as p
from worker.storage.sql import statements as s
from worker.storage.sql.conn import SqlConn, SqlDatabase
from worker.storage.sql.dialect import Dialect


async def write_batch(
    db: SqlDatabase, dialect: Dialect, batch: BatchWrite, now: str, *, vector_queue: bool
) -> BatchResult:
    """Write a checked batch in one transaction, `now` its session's activity time; no
    vector-queue rows unless `vector_queue` (with the index off nothing would drain them)."""
    stored: list[StoredRow] = []
    duplicates = 0
    async with db.transaction() as conn:
        await _claim_session(conn, dialect, batch, now)
        if batch.prompts:
            await conn.executemany(s.PROMPT.sql, map(s.PROMPT.values, batch.prompts))
        for obs in batch.observations:
            new = await conn.fetchrow(s.OBSERVATION.sql, s.OBSERVATION.values(obs))
            if new is None:
                duplicates += 1
            else:
                stored.append(p.stored_record(int(new["id"]), obs))
        for summary in batch.summaries:
            new = await conn.fetchrow(s.SUMMARY.sql, s.SUMMARY.values(summary))
            assert new is not None  # RETURNING of a plain INSERT
            stored.append(p.stored_record(int(new["id"]), summary))
        # The vector queue row commits with its row: Chroma is fed from it, never directly.
        if stored and vector_queue:
            await conn.executemany(s.VECTOR_QUEUE_INSERT, [(r.kind, r.id) for r in stored])
        if batch.dropped:
            await conn.executemany(s.DROPPED.sql, map(s.DROPPED.values, batch.dropped))
        if batch.usage:
            await conn.executemany(s.USAGE.sql, map(s.USAGE.values, batch.usage))
        if batch.event_ids:
            ids = dialect.list_param(batch.event_ids)
            await conn.execute(dialect.insert_processed, (batch.memory_session_id, ids, now))
    return BatchResult(stored=stored, deduplicated=duplicates)


async def mark_announced(
    db: SqlDatabase, dialect: Dialect, rows: Sequence[StoredRow], now: str
) -> None:
    """Set announced_at on the rows not yet marked, in one transaction."""
    async with db.transaction() as conn:
        for kind, table in TABLE_OF.items():
            ids = [r.id for r in rows if r.kind == kind]
            if ids:
                await conn.execute(
                    f"UPDATE {table} SET announced_at = $2 WHERE announced_at IS NULL"
                    f" AND {dialect.id_in}",
                    (dialect.list_param(ids), now),
                )


async def _claim_session(conn: SqlConn, dialect: Dialect, batch: BatchWrite, now: str) -> None:
    sid = batch.memory_session_id
    # Where the backend locks the row, that serialises the session's batches across workers.
    stored_fence = await _fence(conn, dialect, sid)
    if stored_fence is None or stored_fence <= batch.fence:
        prompt_counter = max((pr.prompt_number for pr in batch.prompts), default=0)
        ended_at = now if batch.ended else None
        values = (sid, batch.project, batch.fence, now, ended_at, prompt_counter)
        if await conn.execute(s.SESSION_UPSERT, values) == 1:
            return
        # A concurrent first batch of the session inserted a higher fence meanwhile.
        stored_fence = await _fence(conn, dialect, sid)
    raise _refusal(batch, int(stored_fence or 0))


def _refusal(batch: BatchWrite, stored_fence: int) -> LeaseLostError:
    """The refusal of `batch`, whose fence is older than the one storage holds."""
    return LeaseLostError(
        f"session {batch.memory_session_id}: write refused, fence {batch.fence} is older"
        f" than the stored fence {stored_fence} (another worker holds the lease)",
        stored_fence=stored_fence,
    )


async def _fence(conn: SqlConn, dialect: Dialect, sid: str) -> int | None:
    found = await conn.fetchrow(dialect.lock_session_fence, (sid,))
    return None if found is None else int(found["fence"])
