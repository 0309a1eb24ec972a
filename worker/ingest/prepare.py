"""What may leave the producer: private regions stripped, secrets redacted, size capped.

Order matters: private regions go first (a cut could separate `<private>` from its close
tag), then secrets are redacted, then oversized text fields are cut to head + tail around
the pipeline's `<elided/>` marker until the encoded event fits MEMQ_MAX_EVENT_BYTES.
A giant field (say a 100 MB tool output) is first narrowed to a window a little larger than
any budget, so redaction scans ~1 MB, not 100 MB; after redacting, the _MARGIN characters
at the window's inner edges are dropped, so a secret split by the window's edge never
survives, whether or not the event is then cut again to fit.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import replace

from pipeline.errors import EventDecodeError
from pipeline.events import End, Event, Prompt, Summarize, ToolCall, decode_event, encode_event
from pipeline.prompting.framing import render_tool_field
from pipeline.prompting.truncate import (
    HEAD_RATIO,
    TAIL_RATIO,
    TruncatedField,
    split_observation_field,
)
from pipeline.redaction.privacy import strip_private_tags, strip_private_value
from pipeline.redaction.redact import redact_secrets, redact_value

# The free-text fields of each kind: scrubbed, and cut when the event is over the cap.
TEXT_FIELDS: dict[type, tuple[str, ...]] = {
    Prompt: ("prompt_text",),
    ToolCall: ("tool_input", "tool_output"),
    Summarize: ("last_assistant_message",),
    End: ("reason",),
}
_MARKER_BYTES = 120  # the elided marker, JSON-escaped, plus the field's key
_MIN_FIELD_CHARS = 256
_FIT_ATTEMPTS = 8
_MARGIN = 32_768  # characters between a window's edge and the final cut (> any PEM block)


class PreparedEvent(msgspec.Struct, frozen=True):
    """An event made fit to leave the host, with its wire bytes: the only thing producers and
    the spool take. Made by `prepare` (or read back from the spool, which holds only these)."""

    event: Event
    raw: bytes


def prepare(event: Event, max_bytes: int) -> PreparedEvent:
    """The event scrubbed and capped, once: EventDecodeError when it cannot fit."""
    return PreparedEvent(*prepare_encoded(event, max_bytes))


def prepare_encoded(event: Event, max_bytes: int) -> tuple[Event, bytes]:
    """The event made safe and small, and its wire bytes; EventDecodeError if it cannot fit."""
    # Larger than any cut _fit can ask for, by _MARGIN on the tail side (2 * _MARGIN at the head).
    window_chars = int(max_bytes / (HEAD_RATIO + TAIL_RATIO)) + int(_MARGIN / TAIL_RATIO)
    windows: dict[str, TruncatedField] = {}
    changes: dict[str, Any] = {}
    for name in TEXT_FIELDS[type(event)]:
        value = getattr(event, name)
        if value is None:
            continue
        value = strip_private_tags(value) if isinstance(value, str) else strip_private_value(value)
        if _larger_than(value, window_chars):
            windows[name] = _redacted_window(split_observation_field(value, window_chars))
            changes[name] = windows[name].text
        else:
            changes[name] = redact_secrets(value) if isinstance(value, str) else redact_value(value)
    prepared = replace(event, **changes)
    raw = encode_event(prepared)
    if len(raw) > max_bytes:
        prepared, raw = _fit(prepared, max_bytes, windows)
    decode_event(raw)  # what the workers could not decode is refused here, with the reason
    return prepared, raw


def _redacted_window(window: TruncatedField) -> TruncatedField:
    """Head and tail redacted, then without the _MARGIN characters at their inner edges."""
    # A window's edge can cut a secret in two (a JWT, a private key without its BEGIN line)
    # that no rule then recognises; the margins hold such halves and always go, even when
    # redaction alone made the event small enough.
    head = redact_secrets(window.head)
    head = head[: max(0, len(head) - _MARGIN)]
    tail = redact_secrets(window.tail)[_MARGIN:]
    return TruncatedField(
        head=head,
        tail=tail,
        elided_chars=window.original_size_chars - len(head) - len(tail),
        original_size_chars=window.original_size_chars,
    )


def _fit(event: Event, max_bytes: int, windows: dict[str, TruncatedField]) -> tuple[Event, bytes]:
    """Cut the largest text fields until the encoded event fits in `max_bytes`."""
    names = [n for n in TEXT_FIELDS[type(event)] if getattr(event, n) is not None]
    values = {n: getattr(event, n) for n in names}
    sizes = {n: _encoded_size(v) for n, v in values.items()}
    bare = replace(event, **{n: "" if n == "prompt_text" else None for n in names})
    budgets = _share(max_bytes - len(encode_event(bare)) - _MARKER_BYTES * len(names), sizes)
    targets = {n: b for n, b in budgets.items() if b is not None}  # bytes per field to cut
    if not targets and sizes:  # the plan underestimated escapes: cut the largest field
        largest = max(sizes, key=sizes.__getitem__)
        targets = {largest: sizes[largest]}
    # A cut keeps 90 % of max_chars; under the text's own length it is sure to cut.
    max_chars = {
        n: min(int(t / (HEAD_RATIO + TAIL_RATIO)), _rendered_length(values[n], windows.get(n)) - 1)
        for n, t in targets.items()
    }
    for _ in range(_FIT_ATTEMPTS):
        if not max_chars or any(c < _MIN_FIELD_CHARS for c in max_chars.values()):
            break
        cut = dict(values)
        for n, chars in max_chars.items():
            cut[n] = _cut(values[n], windows.get(n), chars)
        candidate = replace(event, **cut)
        raw = encode_event(candidate)
        if len(raw) <= max_bytes:
            return candidate, raw
        # Multi-byte or escaped text takes more bytes than characters: scale each cut field
        # down by its share of the excess.
        over = len(raw) - max_bytes
        now = {n: len(msgspec.json.encode(cut[n])) for n in max_chars}  # small: exact
        total = sum(now.values()) or 1
        for n, size in now.items():
            max_chars[n] = int(max_chars[n] * (size - over * size / total - 16) / size)
    raise EventDecodeError(
        f"event {event.event_id} is larger than MEMQ_MAX_EVENT_BYTES={max_bytes} even with its "
        "text fields cut: its other fields (cwd, tool_name, ids) are too long"
    )


def _rendered_length(value: object, window: TruncatedField | None) -> int:
    if window is not None:
        return len(window.head) + len(window.tail)
    return len(render_tool_field(value))


def _cut(value: object, window: TruncatedField | None, max_chars: int) -> str:
    if window is None:
        return split_observation_field(value, max_chars).text
    # Cut the window's (redacted) head + tail again; the marker counts against the original.
    inner = split_observation_field(window.head + window.tail, max_chars)
    return TruncatedField(
        head=inner.head,
        tail=inner.tail,
        elided_chars=window.original_size_chars - len(inner.head) - len(inner.tail),
        original_size_chars=window.original_size_chars,
    ).text


def _share(available: int, sizes: dict[str, int]) -> dict[str, int | None]:
    """Split `available` bytes fairly: small fields stay whole (None), big ones get a budget."""
    budgets: dict[str, int | None] = {}
    remaining = available
    ordered = sorted(sizes, key=sizes.__getitem__)
    for i, name in enumerate(ordered):
        fair = remaining // (len(ordered) - i)
        if sizes[name] <= fair:
            budgets[name] = None
            remaining -= sizes[name]
        else:
            budgets[name] = fair
            remaining -= fair
    return budgets


def _larger_than(value: object, size: int) -> bool:
    """Whether the value's encoding may take more than `size` bytes (as _encoded_size plans)."""
    # No character takes more than 6 bytes (`\u001f`): a short string needs no counting.
    if isinstance(value, str) and 6 * len(value) + 2 <= size:
        return False
    return _encoded_size(value) > size


def _encoded_size(value: object) -> int:
    if isinstance(value, str) and value.isascii():
        # Without encoding a giant string: its length plus the common JSON escapes (a plan;
        # the encoded event is measured anyway).
        return len(value) + 2 + sum(value.count(c) for c in '\n"\\\t\r')
    return len(msgspec.json.encode(value))
