"""A session's stream entries decoded: each with its event, or dead with the reason."""

from __future__ import annotations

import msgspec

from pipeline.errors import EventDecodeError
from pipeline.events import Event, decode_event
from worker.queue.streams import Entry


class Delivered(msgspec.Struct, frozen=True):
    """A stream entry and the event it carries."""

    entry: Entry
    event: Event


def decode_entries(
    session: str, entries: list[Entry]
) -> tuple[list[Delivered], list[tuple[Entry, str]]]:
    """The entries' events, and the malformed entries (or of another session) with why."""
    good: list[Delivered] = []
    bad: list[tuple[Entry, str]] = []
    for entry in entries:
        if entry.raw is None:
            bad.append((entry, "stream entry has no 'event' field"))
            continue
        try:
            event = decode_event(entry.raw)
        except EventDecodeError as e:
            bad.append((entry, str(e)))
            continue
        if event.memory_session_id != session:
            bad.append(
                (entry, f"event of session {event.memory_session_id} in stream of {session}")
            )
        else:
            good.append(Delivered(entry, event))
    return good, bad
