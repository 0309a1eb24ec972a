"""When a session's waiting events make an observer turn worth its cost.

A live agent publishes a tool call every few seconds. A turn per call re-sends the system
prompt and the instructions each time, so waiting tool calls gather until their turn is
*due*: a full batch (by count or by characters), a request boundary (a summary request, the
session's end, or a new prompt after some calls: the observer must see the calls under the
request they belong to), or the oldest call having waited long enough. Events that need no
observer call (prompts alone) are due at once. Time is passed in; nothing reads a clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec


class Waiting(msgspec.Struct, frozen=True, kw_only=True):
    """Events published and not yet observed, in order: kinds, sizes, publish times (ms)."""

    kinds: Sequence[str]
    sizes: Sequence[int]
    published_ms: Sequence[int]


class BatchPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """The settings that decide a turn: MEMQ_BATCH_MAX_EVENTS, _MAX_CHARS, _MAX_WAIT_S."""

    max_events: int
    max_chars: int
    max_wait_ms: int


def due_at_ms(waiting: Waiting, policy: BatchPolicy) -> int:
    """When the waiting events' turn is due: at once (the first event's time) or later."""
    first = waiting.published_ms[0] if waiting.published_ms else 0
    calls = [t for kind, t in zip(waiting.kinds, waiting.published_ms, strict=True)
             if kind == "tool_call"]  # fmt: skip
    if not calls:
        return first  # nothing for the observer: bookkeeping costs nothing
    seen_call = False
    for kind in waiting.kinds:
        if kind in ("summarize", "end") or (kind == "prompt" and seen_call):
            return first  # a request boundary
        seen_call = seen_call or kind == "tool_call"
    if len(calls) >= policy.max_events or sum(waiting.sizes) >= policy.max_chars:
        return first  # a full batch
    return calls[0] + policy.max_wait_ms


def is_due(waiting: Waiting, policy: BatchPolicy, now_ms: int) -> bool:
    """Whether the waiting events should be observed now."""
    return due_at_ms(waiting, policy) <= now_ms
