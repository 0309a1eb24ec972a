"""The content hash that deduplicates observations within a memory session.

The original's formula: sha256 over UTF-8 `session \\0 title \\0 narrative`, hex, first 16
characters, with None read as "". memq hashes title and narrative after NFKC normalisation
and whitespace collapsing (so a re-sent observation that differs only in spacing or
compatibility forms is still a duplicate), and when both are empty it hashes the facts in
place of the narrative, so two different facts-only observations no longer collapse into
one row. Plain single-spaced text with a title or narrative hashes exactly as the original.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence

CONTENT_HASH_LENGTH = 16

# Unicode White_Space plus U+FEFF, an explicit set rather than Python's `\s` (which also
# takes U+001C-U+001F) so the rule is the same everywhere it is re-implemented.
_WHITESPACE_RUN = re.compile(
    "[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+"
)
# str.split() also splits at U+001C-U+001F and not at U+FEFF; elsewhere its set is this one.
_SPLIT_DIFFERS = "\x1c\x1d\x1e\x1f\ufeff"
# Node's UTF-8 encoder writes U+FFFD for a lone surrogate; Python's would raise.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def normalize_hash_text(text: str | None) -> str:
    """NFKC-normalise, collapse whitespace runs to one space and trim; None becomes ""."""
    if not text:
        return ""
    text = unicodedata.normalize("NFKC", text)
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # printable: the space is its only whitespace, and nothing to collapse
    if any(c in text for c in _SPLIT_DIFFERS):
        return _WHITESPACE_RUN.sub(" ", text).strip(" ")
    return " ".join(text.split())  # the same set here, and much faster than the regex


def compute_observation_content_hash(
    memory_session_id: str,
    title: str | None,
    narrative: str | None,
    facts: Sequence[str] = (),
) -> str:
    """The 16-hex-digit dedupe key of an observation (facts count only when both are empty)."""
    norm_title = normalize_hash_text(title)
    body = normalize_hash_text(narrative)
    if not norm_title and not body:
        body = "\x00".join(f for f in map(normalize_hash_text, facts) if f)
    material = "\x00".join((memory_session_id or "", norm_title, body))
    try:
        encoded = material.encode("utf-8")
    except UnicodeEncodeError:  # only a lone surrogate fails: do what Node's encoder does
        encoded = _LONE_SURROGATE.sub("\ufffd", material).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()[:CONTENT_HASH_LENGTH]
