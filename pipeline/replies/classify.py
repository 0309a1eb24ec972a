"""Classify an observer reply by shape: XML, idle, quota-limited, auth failure, or prose."""

# Why some wordings are in or out:
# - "reset"/"resets" alone never means quota (the original's false positive on "The
#   subscription limit resets monthly"): a limit must be reached, exceeded, exhausted or hit,
#   or the reply must say "try again".
# - A bare "rate limit reached/exceeded" is a transient 429, not a quota: the provider's
#   Retry-After drives a retry, not a long pause, so it classifies as prose here.
# - The predicates are false for XML-shaped replies, so an XML summary that talks about a
#   limit never pauses a provider; classify_observer_output checks idle, xml, quota, auth,
#   then prose, in that order.

from __future__ import annotations

import re
from typing import Literal

from pipeline.replies.textnorm import collapse_js_whitespace, js_trim

OutputCategory = Literal["xml", "idle", "prose", "quota", "auth"]

_XML_GATE = re.compile(r"<(?:observation|summary|skip_summary)\b", re.IGNORECASE | re.ASCII)


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.ASCII)


_STOP = _words(r"\b(?:reached|exceeded|exhausted|hit|try again)\b")
_STOP_VERB = _words(r"\b(?:reached|exceeded|exhausted|hit)\b")
_LIMIT = _words(r"\b(?:limit|quota)\b")
# The original's six orderings with unbounded gaps, checked as "each step after the last"
# (greedy earliest match is exact for this and stays linear, unlike chained `.*`).
_QUOTA_ORDERS = (
    (_words(r"\bclaude\b"), _words(r"\busage\b"), _words(r"\blimit\b"), _STOP),
    (_STOP_VERB, _words(r"\bclaude\b"), _words(r"\busage\b"), _words(r"\blimit\b")),
    (_words(r"\bweekly\b"), _LIMIT, _STOP),
    (_STOP_VERB, _words(r"\bweekly\b"), _LIMIT),
    (_words(r"\bsubscription\b"), _LIMIT, _STOP),
    (
        _words(r"\b(?:rate limit|quota)\b"),
        _words(r"\b(?:subscription|weekly|claude usage)\b"),
        _STOP,
    ),
)
# One pattern per wording: a single alternation of them scans several times slower.
_QUOTA_PHRASES = tuple(
    _words(pattern)
    for pattern in (
        # "5-hour limit reached", "weekly usage limit exceeded", "monthly spending limit reached"
        r"\b(?:\d+[- ]?hour|five-hour|daily|weekly|monthly|usage|spending)(?: [\w-]+)?"
        r" (?:limit|quota)s?\b.{0,20}?\b(?:reached|exceeded|exhausted|hit)\b",
        # "you've hit your limit", "you exceeded your current quota", never "your rate limit"
        r"\b(?:hit|reached|exceeded|exhausted) your (?:(?!rate\b)[\w-]+ ){0,2}(?:limit|quota)s?\b",
        r"\binsufficient_quota\b",
        r"\bcredit balance is too low\b",
    )
)
_AUTH_PHRASES = tuple(
    _words(pattern)
    for pattern in (
        r"failed to authenticate",
        r"\bauthentication[ _](?:failed|failure|error)\b",
        r"\b(?:authentication|auth)\b.{0,20}?\b(?:required|expired|invalid|again)\b.{0,20}?/login",
        r"\b(?:api|http)(?: error)?:? ?(?:401|403)\b",
        r"\b(?:401|403) (?:unauthorized|forbidden)\b",
        r"\bstatus[:=]? ?(?:401|403)\b",
        r"\brequest failed with (?:status code )?(?:401|403)\b",
        r"/login\b.{0,40}?\b(?:to authenticate|again|to continue|and retry|reauthenticate"
        r"|credentials|provider|claude)\b",
        r"\binvalid (?:x-)?api[ _-]key\b",
        r"\bincorrect api key provided\b",
        # Not "please run /login" alone: prose about a project can say that; a CLI whose
        # credentials failed says why (expired, invalid key, 401) beside it.
    )
)
_RESET_EPOCH = re.compile(r"limit reached\s*\|\s*(\d{9,12})\b", re.IGNORECASE | re.ASCII)
_RESET_PHRASE = re.compile(r"\b(?:resets?|try again)\b [^·∙|;!?]{1,40}", re.IGNORECASE | re.ASCII)


def _flatten(text: str) -> str:
    return collapse_js_whitespace(text).lower()


def _in_order(text: str, steps: tuple[re.Pattern[str], ...]) -> bool:
    pos = 0
    for step in steps:
        if (match := step.search(text, pos)) is None:
            return False
        pos = match.end()
    return True


def _says_quota(flat: str) -> bool:
    return any(p.search(flat) for p in _QUOTA_PHRASES) or any(
        _in_order(flat, steps) for steps in _QUOTA_ORDERS
    )


def _says_auth(flat: str) -> bool:
    return any(p.search(flat) for p in _AUTH_PHRASES)


def is_quota_limited_observer_output(text: object) -> bool:
    """True when a non-XML reply says a usage limit, quota or credit balance ran out."""
    return classify_observer_output(text) == "quota"


def is_auth_failure_observer_output(text: object) -> bool:
    """True when a non-XML reply says the observer's credentials are missing or rejected."""
    if not isinstance(text, str) or _XML_GATE.search(text):
        return False
    return _says_auth(_flatten(text))


def classify_observer_output(text: object) -> OutputCategory:
    """One of idle (not text, blank), xml (a root or skip tag anywhere), quota, auth, prose."""
    if not isinstance(text, str) or not js_trim(text):
        return "idle"
    if _XML_GATE.search(text):
        return "xml"
    flat = _flatten(text)
    if _says_quota(flat):
        return "quota"
    return "auth" if _says_auth(flat) else "prose"


def quota_reset_hint(text: str) -> str | None:
    """The reset fragment of a quota reply as written ("resets 3pm", or epoch seconds), or None."""
    flat = collapse_js_whitespace(text)
    if (epoch := _RESET_EPOCH.search(flat)) is not None:
        return epoch.group(1)
    if (phrase := _RESET_PHRASE.search(flat)) is None:
        return None
    # A sentence ends the phrase; a dot inside a time ("10.30am") does not.
    fragment = phrase.group(0).split(". ", 1)[0]
    return js_trim(fragment).rstrip(".") or None


def preview_output(raw: object, max_chars: int = 200) -> str:
    """A one-line preview for logs: whitespace collapsed, cut at `max_chars` with a count."""
    if not isinstance(raw, str):
        return f"(non-string output: {type(raw).__name__})"
    flat = collapse_js_whitespace(raw)
    if len(flat) <= max_chars:
        return flat
    return f"{flat[:max_chars]}…(+{len(flat) - max_chars} chars)"
