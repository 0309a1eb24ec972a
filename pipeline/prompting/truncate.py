"""Cutting an oversized tool field to its budget: 60 % head, 30 % tail, an explicit marker.

The arithmetic is the original's: text up to `max_chars` is kept whole; longer text keeps
its first floor(max * 0.6) and last floor(max * 0.3) characters around an `<elided/>` marker
that says how many characters were left out. Lengths are Python characters (code points),
not UTF-16 units, so a surrogate pair is never split.

One refinement: a cut never separates a base character from what extends it (combining
marks, ZWJ and the character after it, variation selectors, emoji skin-tone modifiers, tag
characters, the second regional indicator of a flag, LF after CR). The head cut then moves
earlier and the tail cut later, so the field only shrinks and the marker's count grows by
the moved characters. This approximates UAX #29 clusters with the stdlib; a cluster longer
than 64 code points (e.g. "Zalgo" text) is cut where the arithmetic says.
"""

from __future__ import annotations

import math
import unicodedata

import msgspec

from pipeline.prompting.framing import render_tool_field

OBSERVATION_FIELD_MAX_CHARS = 16_000
HEAD_RATIO = 0.6
TAIL_RATIO = 0.3
_MAX_CLUSTER_SHIFT = 64


class TruncatedField(msgspec.Struct, frozen=True, kw_only=True):
    """A rendered tool field, whole (`elided_chars == 0`) or as head + marker + tail."""

    head: str
    tail: str = ""
    elided_chars: int = 0
    original_size_chars: int = 0

    @property
    def marker(self) -> str:
        """The elision marker placed between head and tail; empty when nothing was cut."""
        if not self.elided_chars:
            return ""
        return (
            f'\n... <elided chars="{self.elided_chars}" '
            f'original_size_chars="{self.original_size_chars}" reason="oversize" /> ...\n'
        )

    @property
    def text(self) -> str:
        """Head, marker and tail joined."""
        return self.head + self.marker + self.tail


def split_observation_field(
    value: object, max_chars: int = OBSERVATION_FIELD_MAX_CHARS
) -> TruncatedField:
    """Render a tool field and cut it to `max_chars`, keeping head and tail apart."""
    if max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, got {max_chars}")
    raw = render_tool_field(value)
    size = len(raw)
    if size <= max_chars:
        return TruncatedField(head=raw, original_size_chars=size)
    head_end = _move_cut(raw, math.floor(max_chars * HEAD_RATIO), step=-1)
    tail_len = math.floor(max_chars * TAIL_RATIO)
    tail_start = _move_cut(raw, size - tail_len, step=1) if tail_len else size
    return TruncatedField(
        head=raw[:head_end],
        tail=raw[tail_start:],
        elided_chars=tail_start - head_end,
        original_size_chars=size,
    )


def truncate_observation_field(value: object, max_chars: int = OBSERVATION_FIELD_MAX_CHARS) -> str:
    """Render a tool field; over `max_chars`, keep 60 % head + 30 % tail around an elided marker."""
    return split_observation_field(value, max_chars).text


def _move_cut(text: str, cut: int, *, step: int) -> int:
    moved = cut
    while 0 < moved < len(text) and _splits_cluster(text, moved):
        moved += step
        if abs(moved - cut) > _MAX_CLUSTER_SHIFT:
            return cut
    return moved


def _splits_cluster(text: str, i: int) -> bool:
    """Whether a cut between text[i - 1] and text[i] would break a grapheme cluster."""
    before, after = text[i - 1], text[i]
    if _extends(after) or before == "\u200d" or (before == "\r" and after == "\n"):
        return True
    if _is_regional_indicator(before) and _is_regional_indicator(after):
        run = 0
        while run < i and _is_regional_indicator(text[i - 1 - run]):
            run += 1
        return run % 2 == 1  # an odd run before the cut means `after` completes a flag
    return False


def _extends(ch: str) -> bool:
    cp = ord(ch)
    return (
        unicodedata.category(ch) in ("Mn", "Mc", "Me")
        or cp == 0x200D  # zero-width joiner
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0xE0100 <= cp <= 0xE01EF  # variation selectors supplement
        or 0x1F3FB <= cp <= 0x1F3FF  # emoji skin-tone modifiers
        or 0xE0020 <= cp <= 0xE007F  # tag characters (subdivision flags)
    )


def _is_regional_indicator(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF
