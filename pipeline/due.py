"""When a session's pending events make an observer turn worth its cost.

A live agent publishes a tool call every few seconds. A turn per call re-sends the system
prompt and the instructions each time, so pending calls wait until a turn is *due*: a full
batch (by count or by characters), a request boundary (a prompt, summary request or session
end: the observer must see the calls under the request they belong to), or the oldest call
having waited long enough. Time is passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

EventKind = Literal["prompt", "tool_call", "summarize", "end"]


class Waiting(msgspec.Struct, frozen=True, kw_only=True):
    """Events published and not yet observed: their kinds, sizes and the oldest one's time."""

    kinds: Sequence[str]
    sizes: Sequence[int]
    oldest_ms: int


class BatchPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """The settings that decide a turn: MEMQ_BATCH_MAX_EVENTS, _MAX_CHARS, _MAX_WAIT_S."""

    max_events: int
    max_chars: int
    max_wait_ms: int


def due_at_ms(waiting: Waiting, policy: BatchPolicy) -> int:
    """The time (ms) the waiting events' turn is due: at once (their oldest time) or later."""
    if not waiting.kinds or any(kind != "tool_call" for kind in waiting.kinds):
        return waiting.oldest_ms  # a request boundary flushes at once
    if len(waiting.kinds) >= policy.max_events or sum(waiting.sizes) >= policy.max_chars:
        return waiting.oldest_ms  # a full batch
    return waiting.oldest_ms + policy.max_wait_ms


def is_due(waiting: Waiting, policy: BatchPolicy, now_ms: int) -> bool:
    """Whether the waiting events should be observed now."""
    return due_at_ms(waiting, policy) <= now_ms
