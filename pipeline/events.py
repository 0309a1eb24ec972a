"""Events on the wire: the four kinds an agent host publishes, decoded once at the edge."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

from pipeline.errors import EventDecodeError

# Ids end up inside Redis keys, job ids and file names: no whitespace, no control
# characters, no braces (reserved for Redis Cluster hash tags).
_ID_PATTERN = r"^[^\s\x00-\x1f{}]+$"
Identifier = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=_ID_PATTERN)]
Timestamp = Annotated[datetime, msgspec.Meta(tz=True)]
Sha256Hex = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]


class _Event(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="kind"):
    event_id: Identifier
    """Producer-made idempotency key."""
    memory_session_id: Identifier
    project: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
    occurred_at: Timestamp
    host: str | None = None
    agent: str | None = None


class Prompt(_Event, frozen=True, kw_only=True, tag="prompt"):
    """The user's request: starts a session or begins a new request inside it."""

    prompt_text: str
    prompt_number: Annotated[int, msgspec.Meta(ge=0)] | None = None


class ToolCall(_Event, frozen=True, kw_only=True, tag="tool_call"):
    """One tool execution of the observed agent; input and output are any JSON value."""

    tool_name: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
    tool_input: Any = None
    tool_output: Any = None
    cwd: str = ""
    tool_use_id: str | None = None
    failed: bool = False
    """The tool reported an error (a command that exited non-zero, a missing file): then
    `tool_output` holds the error text."""
    file_hashes: dict[str, Sha256Hex | None] | None = None
    """Each evidence path (relative to the checkout's root when inside it) -> SHA-256 of its
    content after the call; None when unknown (over 2 MB, unreadable). Absent in older events."""


class Summarize(_Event, frozen=True, kw_only=True, tag="summarize"):
    """Ask the observer for a progress summary of the session so far."""

    last_assistant_message: str | None = None


class End(_Event, frozen=True, kw_only=True, tag="end"):
    """The session is over; its stream is deleted once drained."""

    reason: str | None = None


Event = Prompt | ToolCall | Summarize | End

_DECODER = msgspec.json.Decoder(Event)
_ENCODER = msgspec.json.Encoder()


def decode_event(raw: bytes | str) -> Event:
    """Decode one event from JSON; raises EventDecodeError with a one-line reason."""
    try:
        return _DECODER.decode(raw)
    except msgspec.DecodeError as e:  # ValidationError subclasses DecodeError
        raise EventDecodeError(f"bad event: {_one_line(str(e))}") from e
    except RecursionError as e:  # msgspec recurses on deeply nested JSON values
        raise EventDecodeError("bad event: JSON nested too deeply") from e


def encode_event(event: Event) -> bytes:
    """Encode one event as compact JSON, the form stored in a stream entry."""
    return _ENCODER.encode(event)


def kind_of(event: Event) -> str:
    """The event's `kind` on the wire: prompt, tool_call, summarize or end."""
    return str(event.__struct_config__.tag)


def _one_line(text: str) -> str:
    return " ".join(text.split())
