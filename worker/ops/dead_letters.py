"""Dead letters and dropped replies: list them, and replay them after a fix."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from redis.asyncio import Redis

from pipeline.errors import EventDecodeError
from pipeline.events import decode_event
from pipeline.prompting.modes import Mode
from pipeline.replies.parser import parse_agent_xml
from pipeline.turns.caps import CAPPED_CATEGORY
from pipeline.turns.settle import TOO_LARGE_CATEGORY
from pipeline.turns.turn_records import observation_rows, summary_row
from worker.ingest.producer import event_publish_args
from worker.keys import Keys
from worker.queue.leases import Lease
from worker.queue.scheduling import Scheduler
from worker.redis_text import as_text
from worker.sessions.outbox import Outbox
from worker.settings import Settings
from worker.storage.protocol import Store
from worker.storage.records import BatchWrite, DroppedRow


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of `<prefix>:dead`."""

    id: str
    session: str
    entry_id: str
    reason: str
    failed_at_ms: int
    event: str


class ReplayResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one replay did: `replayed`, or `skipped` with the reason."""

    id: str
    status: str
    detail: str = ""


async def list_dead(redis: Redis, keys: Keys, limit: int = 100) -> list[DeadLetter]:
    """Newest dead letters first."""
    entries: Any = await redis.xrevrange(keys.dead, count=limit)
    return [_dead(i, f) for i, f in entries]


async def replay_dead(
    redis: Redis, keys: Keys, settings: Settings, ids: list[str] | None
) -> list[ReplayResult]:
    """Re-publish dead events to their session streams (all when ids is None), in order."""
    entries: Any = await redis.xrange(keys.dead)
    wanted = None if ids is None else set(ids)
    scheduler = Scheduler(redis, keys)
    results = []
    for entry_id, fields in entries:
        letter = _dead(entry_id, fields)
        if wanted is not None and letter.id not in wanted:
            continue
        try:
            event = decode_event(letter.event)
        except EventDecodeError as e:
            results.append(ReplayResult(id=letter.id, status="skipped", detail=str(e)))
            continue
        # The idempotency marker would swallow the replay: this one is deliberate.
        await redis.delete(keys.seen(event.event_id))
        status, _ = await scheduler.publish(
            event_publish_args(keys, settings, event, letter.event.encode())
        )
        if status == -1:
            results.append(ReplayResult(id=letter.id, status="skipped", detail="backpressure"))
            continue
        await redis.xdel(keys.dead, letter.id)
        results.append(ReplayResult(id=letter.id, status="replayed"))
    return results


async def replay_dropped(
    redis: Redis,
    keys: Keys,
    store: Store,
    mode: Mode,
    settings: Settings,
    rows: list[DroppedRow],
) -> list[ReplayResult]:
    """Re-parse kept replies with today's parser and store what now parses."""
    outbox = Outbox(redis, keys, store, settings.feed_maxlen)
    results = []
    for row in rows:
        rid = f"dropped:{row.id}"
        if row.category in (CAPPED_CATEGORY, TOO_LARGE_CATEGORY):
            # Kept to say what a limit left out: replaying would store past the limit.
            detail = f"{row.category}: cut by a limit, not a parser failure"
            results.append(ReplayResult(id=rid, status="skipped", detail=detail))
            continue
        parsed = parse_agent_xml(row.raw, valid_types=mode.type_ids)
        if parsed.kind not in ("observations", "summary"):
            detail = parsed.reason or parsed.kind
            results.append(ReplayResult(id=rid, status="skipped", detail=detail))
            continue
        lease = await Lease.acquire(redis, keys, row.memory_session_id, 10_000)
        if lease is None:
            results.append(ReplayResult(id=rid, status="skipped", detail="session busy"))
            continue
        try:
            now = datetime.now(UTC)
            common = {"session": row.memory_session_id, "project": row.project}
            observations = observation_rows(
                parsed.observations,
                [],
                prompt_number=None,
                created_at=now,
                model="replay",
                event_ids=row.event_ids,
                **common,
            )
            summaries = (
                [
                    summary_row(
                        parsed.summary, prompt_number=None, created_at=now, model="replay", **common
                    )
                ]
                if parsed.kind == "summary" and parsed.summary
                else []
            )
            written = await store.write_batch(
                BatchWrite(
                    memory_session_id=row.memory_session_id,
                    project=row.project,
                    fence=lease.token,
                    event_ids=[],
                    observations=observations,
                    summaries=summaries,
                )
            )
            await store.mark_dropped_replayed(row.id)
            await outbox.flush(row.memory_session_id)
        finally:
            await lease.release()
        results.append(
            ReplayResult(id=rid, status="replayed", detail=f"{len(written.stored)} rows")
        )
    return results


def _dead(entry_id: bytes | str, fields: dict[bytes, bytes]) -> DeadLetter:
    def text(name: bytes) -> str:
        return fields.get(name, b"").decode("utf-8", "replace")

    return DeadLetter(
        id=as_text(entry_id),
        session=text(b"session"),
        entry_id=text(b"entry_id"),
        reason=text(b"reason"),
        failed_at_ms=int(text(b"failed_at_ms") or 0),
        event=text(b"event"),
    )
