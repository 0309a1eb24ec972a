"""What one turn may store: observations per turn and characters per field, cut with a reason.

Pure: values in, values out. An observer reply is untrusted input (a reply once held 10,000
observations for one tool call, another a 50 MB narrative); the cut keeps the first
observations and each field's head and tail, and says what it left out.
"""

from __future__ import annotations

import msgspec

from pipeline.prompting.truncate import truncate_observation_field
from pipeline.replies.parser import ParsedObservation

CAPPED_CATEGORY = "capped"


class TurnCaps(msgspec.Struct, frozen=True, kw_only=True):
    """The most one turn stores: observations, and characters of one text field."""

    max_observations: int
    field_chars: int


class Capped(msgspec.Struct, frozen=True, kw_only=True):
    """The observations a turn keeps, and why some were cut or dropped (None: nothing was)."""

    observations: list[ParsedObservation]
    reason: str | None = None


def cap_observations(observations: list[ParsedObservation], caps: TurnCaps) -> Capped:
    """Keep the first `caps.max_observations`, each text field cut to `caps.field_chars`."""
    kept = observations[: caps.max_observations]
    cut_fields = 0
    capped: list[ParsedObservation] = []
    for o in kept:
        fields = {
            "title": _cut(o.title, caps.field_chars),
            "subtitle": _cut(o.subtitle, caps.field_chars),
            "narrative": _cut(o.narrative, caps.field_chars),
            "facts": [_cut(f, caps.field_chars) or "" for f in o.facts],
            "concepts": [_cut(c, caps.field_chars) or "" for c in o.concepts],
        }
        changed = sum(_changed(getattr(o, name), value) for name, value in fields.items())
        cut_fields += changed
        capped.append(msgspec.structs.replace(o, **fields) if changed else o)
    parts = []
    if len(observations) > len(kept):
        parts.append(
            f"kept {len(kept)} of {len(observations)} observations"
            f" (MEMQ_MAX_OBSERVATIONS_PER_TURN={caps.max_observations})"
        )
    if cut_fields:
        parts.append(
            f"cut {cut_fields} field(s) to {caps.field_chars} characters (MEMQ_FIELD_BUDGET_CHARS)"
        )
    return Capped(observations=capped, reason="; ".join(parts) or None)


def _cut(value: str | None, max_chars: int) -> str | None:
    if value is None or len(value) <= max_chars:
        return value
    return truncate_observation_field(value, max_chars)


def _changed(before: object, after: object) -> int:
    if isinstance(before, list) and isinstance(after, list):
        return sum(b != a for b, a in zip(before, after, strict=True))
    return int(before != after)
