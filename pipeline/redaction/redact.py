"""Secret redaction: find credentials in text and JSON values, replace each with a typed marker.

The kinds of secret and how each is found live in pipeline.redaction.patterns; this module
scans a text with them, merges what they find and writes the markers.
"""

from __future__ import annotations

import re

import msgspec

from pipeline.redaction.names import is_secret_name
from pipeline.redaction.patterns import SECRET_KINDS, SECRET_PATTERNS
from pipeline.redaction.placeholders import is_placeholder

__all__ = ["SECRET_KINDS", "SecretMatch", "find_secrets", "redact_secrets", "redact_value"]


class SecretMatch(msgspec.Struct, frozen=True):
    """One secret in a text: its kind and the half-open span `[start, end)` to redact."""

    kind: str
    start: int
    end: int


_RANKED = tuple((SECRET_KINDS.index(p.kind), p) for p in SECRET_PATTERNS)
# Any anchor of any kind. One search with it beats a search per anchor on short text (a
# JSON key, a command line) but not on long text, where the alternation, without a
# literal prefix, is tried at almost every character.
_ANY_ANCHOR = re.compile("|".join(a.pattern for p in SECRET_PATTERNS for a in p.anchors))
_SHORT_TEXT = 256
# A replacement can expose a neighbour (a look-around that saw a secret's first character
# now sees the marker's `[`), so redaction repeats until nothing is found; more than two
# passes never happens in practice, the cap only bounds the work.
_MAX_PASSES = 4


def find_secrets(text: str) -> list[SecretMatch]:
    """Secrets in the text, in order and disjoint (overlaps merge; the first, longest wins)."""
    folded = text.lower()  # what the anchors are searched in (pipeline.redaction.patterns)
    if len(text) <= _SHORT_TEXT and _ANY_ANCHOR.search(folded) is None:
        return []
    found = [
        (start, -end, rank, pattern.kind)
        for rank, pattern in _RANKED
        if pattern.may_occur_in(folded)
        for start, end in pattern.find(text)
    ]
    found.sort()
    merged: list[SecretMatch] = []
    for start, neg_end, _, kind in found:
        if merged and start < merged[-1].end:
            if -neg_end > merged[-1].end:
                merged[-1] = SecretMatch(merged[-1].kind, merged[-1].start, -neg_end)
            continue
        merged.append(SecretMatch(kind, start, -neg_end))
    return merged


def redact_secrets(text: str) -> str:
    """Replace every secret with `[REDACTED:<kind>]`; the text around it is kept."""
    for _ in range(_MAX_PASSES):
        matches = find_secrets(text)
        if not matches:
            break
        pieces: list[str] = []
        pos = 0
        for match in matches:
            pieces += (text[pos : match.start], _marker(match.kind))
            pos = match.end
        pieces.append(text[pos:])
        text = "".join(pieces)
    return text


def redact_value(value: object) -> object:
    """Return a copy of a JSON value with secrets redacted in every string, keys included.

    A string or number under a secret-looking key (`password`, `apiKey`, …) is replaced
    whole unless it is obviously not a secret (empty, a reference, a placeholder).
    """
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return dict(_redact_member(k, v) for k, v in value.items())
    return value


def _redact_member(key: object, value: object) -> tuple[object, object]:
    if not isinstance(key, str):
        return key, redact_value(value)
    key = redact_secrets(key)
    # Judge the redacted key without its markers, so a second pass judges it the same.
    if not is_secret_name(_MARKER.sub(" ", key)):
        return key, redact_value(value)
    if isinstance(value, list):  # `{"password": ["…", "…"]}`: each item is a secret
        return key, [_redact_secret(item) for item in value]
    return key, _redact_secret(value)


def _redact_secret(value: object) -> object:
    """A value under a secret name: a string or number goes whole unless a placeholder."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return redact_value(value)
    text = str(value)
    if is_placeholder(text, bare=False):
        return value
    matches = find_secrets(text)
    whole = len(matches) == 1 and (matches[0].start, matches[0].end) == (0, len(text))
    return _marker(matches[0].kind if whole else "password-assignment")


_MARKER = re.compile(r"\[REDACTED:[a-z-]+\]")


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"
