"""Rows for fan-out tests: store them in real SQLite, announce them as the worker does."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import msgspec
from redis.asyncio import Redis

from worker.keys import Keys
from worker.sessions.outbox import Outbox
from worker.storage.protocol import Store
from worker.storage.records import (
    BatchWrite,
    ObservationRow,
    PromptRow,
    StoredRow,
    SummaryRow,
)

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
_HASHES = itertools.count(1)


def observation(
    n: int,
    *,
    session: str = "s1",
    project: str = "demo",
    type: str = "discovery",
    title: str | None = None,
    narrative: str | None = None,
    concepts: Sequence[str] = (),
    facts: Sequence[str] = (),
    files: Sequence[str] = (),
) -> ObservationRow:
    """An observation row, its time `n` seconds after T0."""
    return ObservationRow(
        memory_session_id=session,
        project=project,
        type=type,
        title=title if title is not None else f"observation {n}",
        subtitle=f"subtitle {n}",
        facts=list(facts) or [f"fact {n}"],
        narrative=narrative if narrative is not None else f"narrative {n}",
        concepts=list(concepts),
        files_read=list(files),
        files_modified=[],
        prompt_number=1,
        content_hash=f"hash-{next(_HASHES)}",
        created_at=T0 + timedelta(seconds=n),
    )


def prompt(n: int, text: str, *, session: str = "s1", project: str = "demo") -> PromptRow:
    """A user prompt row, its time `n` seconds after T0."""
    return PromptRow(
        memory_session_id=session,
        project=project,
        prompt_number=n,
        prompt_text=text,
        created_at=T0 + timedelta(seconds=n),
        event_id=f"{session}-prompt-{n}",
    )


def summary(n: int, request: str, *, session: str = "s1", project: str = "demo") -> SummaryRow:
    """A summary row, its time `n` seconds after T0."""
    return SummaryRow(
        memory_session_id=session,
        project=project,
        request=request,
        investigated="the tests",
        learned="how it works",
        completed="the fix",
        next_steps="none",
        notes=None,
        prompt_number=1,
        created_at=T0 + timedelta(seconds=n),
    )


def fake_row(n: int, **fields: object) -> StoredRow:
    """A row as announced, without storing it (ids are `n`)."""
    base: dict[str, object] = {
        "kind": "observation",
        "id": n,
        "memory_session_id": "s1",
        "project": "demo",
        "created_at": "2026-03-02T10:00:00.000Z",
        "type": "discovery",
        "title": f"row {n}",
        "facts": [],
        "concepts": [],
        "files_read": [],
        "files_modified": [],
    }
    return msgspec.convert({**base, **fields}, StoredRow)


async def store_rows(
    store: Store,
    *,
    session: str = "s1",
    project: str = "demo",
    prompts: Sequence[PromptRow] = (),
    observations: Sequence[ObservationRow] = (),
    summaries: Sequence[SummaryRow] = (),
) -> list[StoredRow]:
    """Write one batch as the worker does; the new rows, ready to announce."""
    result = await store.write_batch(
        BatchWrite(
            memory_session_id=session,
            project=project,
            fence=1,
            event_ids=[],
            prompts=list(prompts),
            observations=list(observations),
            summaries=list(summaries),
        )
    )
    return result.stored


async def announce(redis: Redis, keys: Keys, store: Store, rows: Sequence[StoredRow]) -> None:
    """Announce rows exactly as the worker does (PUBLISH + XADD to the feed)."""
    outbox = Outbox(redis, keys, store, feed_maxlen=10_000)
    pipe = redis.pipeline(transaction=False)
    outbox.queue(pipe, rows)
    await pipe.execute()
    await outbox.sent(rows)
