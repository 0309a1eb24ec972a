"""What a session's job reads and when: a batch of stream entries, when its turn is due, and
the turns it makes (the pure rules are `pipeline.turns.due` and `pipeline.turns.batching`)."""

from __future__ import annotations

import asyncio
import time

from pipeline.errors import EventDecodeError
from pipeline.events import End, Summarize, decode_event, kind_of
from pipeline.turns.batching import TurnPlan, plan_turns
from pipeline.turns.due import BatchPolicy, Waiting, due_at_ms
from worker.queue.streams import Entry, SessionStream
from worker.sessions.delivered import Delivered
from worker.settings import Settings


def until_due_s(delivered: list[Delivered], s: Settings) -> float:
    """Seconds until the delivered events' turn is due (`pipeline.turns.due`); 0 when it is."""
    policy = BatchPolicy(
        max_events=s.batch_max_events,
        max_chars=s.batch_max_chars,
        max_wait_ms=int(s.batch_max_wait_s * 1000),
    )
    waiting = Waiting(
        kinds=[kind_of(d.event) for d in delivered],
        sizes=[len(d.entry.raw or b"") for d in delivered],
        published_ms=[d.entry.published_ms for d in delivered],
    )
    # The entries' times are Redis's clock, `time.time()` this worker's: a skew between them
    # must never hold a turn longer than the longest wait.
    wait_s = (due_at_ms(waiting, policy) - time.time() * 1000) / 1000
    return min(s.batch_max_wait_s, max(0.0, wait_s))


def plan_entries(delivered: list[Delivered], s: Settings) -> list[tuple[TurnPlan, list[Entry]]]:
    """The batch's turns, each with the stream entries it consumes (acked together)."""
    plans = plan_turns(
        [d.event for d in delivered],
        max_tool_calls=s.batch_max_events,
        max_chars=s.batch_max_chars,
        sizes=[len(d.entry.raw or b"") for d in delivered],
        own_servers=s.own_mcp_servers,
    )
    # Turns take the events in order, each once (plan_turns' contract): consecutive slices.
    turns, start = [], 0
    for plan in plans:
        end = start + len(plan.events)
        turns.append((plan, [d.entry for d in delivered[start:end]]))
        start = end
    return turns


async def read_batch(
    stream: SessionStream, max_events: int, wait_ms: int, *, claim: bool
) -> list[Entry]:
    """Pending entries first, then new ones; wait briefly so a burst shares one turn."""
    entries = await stream.read(max_events, claim=claim)
    if not entries or len(entries) >= max_events or wait_ms <= 0:
        return entries
    age_ms = time.time() * 1000 - entries[-1].published_ms
    if age_ms >= wait_ms or flushes(entries):
        return entries
    await asyncio.sleep((wait_ms - age_ms) / 1000)
    return entries + await stream.read(max_events - len(entries), claim=False)


def flushes(entries: list[Entry]) -> bool:
    """Whether a summary request or the session's end is among `entries` (due at once)."""
    # Decided from the decoded event, never from the raw JSON: a tool input holding an "end"
    # key or a prompt quoting "summarize" says nothing about the event's kind. An entry that
    # does not decode is dead-lettered by the caller; it flushes nothing.
    for entry in entries:
        if entry.raw is None:
            continue
        try:
            event = decode_event(entry.raw)
        except EventDecodeError:
            continue
        if isinstance(event, Summarize | End):
            return True
    return False
