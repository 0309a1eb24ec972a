"""One turn's write as a single function run in the SQLite connection's own thread.

aiosqlite sends every statement to its thread separately: a batch of eight observations took
about twenty hops, and each hop made the event loop and that thread trade the GIL. Running
the whole transaction as one call costs one hop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

import aiosqlite

from worker.storage import rows as db
from worker.storage.protocol import StaleFenceError
from worker.storage.records import BatchResult, BatchWrite, StoredRow

T = TypeVar("T")


class WriteCancelledError(Exception):
    """The caller stopped waiting before COMMIT: the transaction was rolled back."""


Job = Callable[[sqlite3.Connection, threading.Event], T]


async def in_connection_thread(conn: aiosqlite.Connection, fn: Job[T]) -> T:
    """Run `fn(raw_connection, cancelled)` in aiosqlite's thread, the only one that may use it.

    A cancelled caller sets `cancelled`, so a transaction still waiting on SQLite's busy
    timeout rolls back instead of committing behind the caller's back. `_execute` and `_conn`
    are private to aiosqlite; its pin in pyproject.toml and the store tests guard that.
    """
    cancelled = threading.Event()
    try:
        result: T = await conn._execute(  # type: ignore[no-untyped-call]
            lambda: fn(conn._conn, cancelled)
        )
    except asyncio.CancelledError:
        cancelled.set()
        raise
    return result


def write_batch(
    raw: sqlite3.Connection, cancelled: threading.Event, batch: BatchWrite, now: str
) -> BatchResult:
    """Write `batch` in one IMMEDIATE transaction; StaleFenceError when the fence is old."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        result = _write(raw, batch, now)
        _commit(raw, cancelled)
    except BaseException:
        _rollback(raw)
        raise
    return result


def mark_announced(
    raw: sqlite3.Connection, cancelled: threading.Event, rows: list[StoredRow], now: str
) -> None:
    """Set announced_at on rows not yet marked, in one transaction."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        for table, kind in (("observations", "observation"), ("summaries", "summary")):
            ids = [r.id for r in rows if r.kind == kind]
            if ids:
                raw.execute(
                    f"UPDATE {table} SET announced_at = ? WHERE announced_at IS NULL"
                    " AND id IN (SELECT value FROM json_each(?))",
                    (now, f"[{','.join(map(str, ids))}]"),
                )
        _commit(raw, cancelled)
    except BaseException:
        _rollback(raw)
        raise


def _write(raw: sqlite3.Connection, batch: BatchWrite, now: str) -> BatchResult:
    _claim_session(raw, batch, now)
    if batch.prompts:
        raw.executemany(db.INSERT_PROMPT, map(db.prompt_params, batch.prompts))
    stored: list[StoredRow] = []
    duplicates = 0
    for obs in batch.observations:
        new = raw.execute(db.INSERT_OBSERVATION, db.observation_params(obs)).fetchone()
        if new is None:
            duplicates += 1
        else:
            stored.append(db.stored_observation(new[0], obs))
    for summary in batch.summaries:
        (row_id,) = raw.execute(db.INSERT_SUMMARY, db.summary_params(summary)).fetchone()
        stored.append(db.stored_summary(row_id, summary))
    # The vector outbox row commits with its row: Chroma is fed from it, never directly.
    if stored:
        raw.executemany(db.INSERT_OUTBOX, [(r.kind, r.id) for r in stored])
    if batch.dropped:
        raw.executemany(db.INSERT_DROPPED, map(db.dropped_params, batch.dropped))
    if batch.usage:
        raw.executemany(db.INSERT_USAGE, map(db.usage_params, batch.usage))
    raw.executemany(
        db.INSERT_PROCESSED, [(batch.memory_session_id, eid, now) for eid in batch.event_ids]
    )
    return BatchResult(stored=stored, deduplicated=duplicates)


def _claim_session(raw: sqlite3.Connection, batch: BatchWrite, now: str) -> None:
    sid = batch.memory_session_id
    found = raw.execute("SELECT fence FROM sessions WHERE memory_session_id = ?", (sid,)).fetchone()
    if found is not None and found[0] > batch.fence:
        raise StaleFenceError.refusing(batch, int(found[0]))
    raw.execute(
        db.UPSERT_SESSION,
        {
            "sid": sid,
            "project": batch.project,
            "fence": batch.fence,
            "now": now,
            "ended_at": now if batch.ended else None,
            "prompt_counter": max((p.prompt_number for p in batch.prompts), default=0),
        },
    )


def _commit(raw: sqlite3.Connection, cancelled: threading.Event) -> None:
    if cancelled.is_set():
        raise WriteCancelledError("the caller was cancelled before COMMIT")
    raw.execute("COMMIT")


def _rollback(raw: sqlite3.Connection) -> None:
    # No transaction left when SQLite already rolled back (e.g. disk full).
    if raw.in_transaction:
        raw.execute("ROLLBACK")
