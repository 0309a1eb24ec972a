"""Parse the observer's reply into observations, a summary, a skip, or a reasoned rejection."""

# What is accepted (tests/data/replies/ holds one example of each, with its expected parse):
# - the whole reply may be one ``` or ```xml fenced block (as in the original);
# - <skip_summary/>, optionally with reason="…" or reason='…', any case, or as an empty
#   <skip_summary …></skip_summary> element, wins over everything else in the reply;
# - otherwise the first *complete* <observation>…</observation> or <summary>…</summary> block
#   decides the kind, so prose that mentions a tag before the real block is harmless;
# - tag names match in any case and open tags may carry attributes; self-closing field or
#   root tags are ignored;
# - field text is trimmed with JavaScript's whitespace set, CDATA sections are unwrapped,
#   comments dropped and XML entities decoded outside CDATA.
# Every scan is str.find or a possessive regex from a moving position: linear in the reply.

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from typing import Literal

import msgspec

from pipeline.textnorm import (
    JS_WHITESPACE,
    JS_WHITESPACE_CLASS,
    decode_xml_entities,
    js_rstrip,
    js_trim,
    xml_text_content,
)

ParseKind = Literal["observations", "summary", "skip", "invalid"]

PARSE_FAILURE_REASONS = (
    "not_text",  # the reply is not a str
    "empty",  # blank after JavaScript trim
    "no_root",  # no <observation> or <summary> open tag anywhere
    "no_complete_block",  # open tags, but none is closed (e.g. a truncated reply)
    "all_observations_empty",  # every observation block lacked title, narrative, facts, concepts
    "summary_all_empty",  # no summary block had any of request..next_steps
)


class ParsedObservation(msgspec.Struct, frozen=True):
    """One observation; empty scalars are None, lists hold trimmed non-empty items."""

    type: str
    title: str | None
    subtitle: str | None
    facts: list[str]
    narrative: str | None
    concepts: list[str]
    files_read: list[str]
    files_modified: list[str]
    type_fallback: bool = False
    """The type was missing or not one of the mode's types; the mode's first type was used."""


class ParsedSummary(msgspec.Struct, frozen=True):
    """A progress summary, or a skipped one (`skipped=True`, every text field None)."""

    request: str | None
    investigated: str | None
    learned: str | None
    completed: str | None
    next_steps: str | None
    notes: str | None
    skipped: bool = False
    skip_reason: str | None = None


class ParseResult(msgspec.Struct, frozen=True):
    """What a reply held; `reason` is one of PARSE_FAILURE_REASONS when `valid` is False."""

    valid: bool
    observations: list[ParsedObservation]
    summary: ParsedSummary | None
    kind: ParseKind
    reason: str | None


_WS = JS_WHITESPACE_CLASS
_FENCE = "```"
_SKIP = re.compile(
    rf"<skip_summary(?:{_WS}++reason{_WS}*+={_WS}*+(?:\"([^\"]*+)\"|'([^']*+)'))?{_WS}*+"
    rf"(?:/>|>{_WS}*+</skip_summary{_WS}*+>)",
    re.IGNORECASE | re.ASCII,
)
_ROOT_MENTION = re.compile(r"<(?:observation|summary)(?![\w.:-])", re.IGNORECASE | re.ASCII)


def _tag_pattern(*names: str) -> re.Pattern[str]:
    # Only the names a caller cares about are matched, plus CDATA and comment openers so
    # that tags inside them stay text. Possessive quantifiers keep every attempt linear.
    return re.compile(
        rf"<(?:!\[CDATA\[|!--|(/?)({'|'.join(names)})(?![\w.:-])([^<>]*+)>)",
        re.IGNORECASE | re.ASCII,
    )


_ROOT_TAGS = _tag_pattern("observation", "summary")
_OBSERVATION_TAGS = _tag_pattern(
    "type", "title", "subtitle", "narrative", "facts", "concepts", "files_read", "files_modified"
)
_SUMMARY_FIELDS = ("request", "investigated", "learned", "completed", "next_steps", "notes")
_SUMMARY_TAGS = _tag_pattern(*_SUMMARY_FIELDS)
_FACT_TAGS = _tag_pattern("fact")
_CONCEPT_TAGS = _tag_pattern("concept")
_FILE_TAGS = _tag_pattern("file")

Span = tuple[int, int]


def strip_code_fences(raw: str) -> str:
    """Return the body when the whole reply is one ``` or ```xml fenced block, else `raw`."""
    start = len(raw) - len(raw.lstrip(JS_WHITESPACE))
    if not raw.startswith(_FENCE, start):
        return raw
    head = start + len(_FENCE)
    tag = raw[head : head + 3]
    if tag.isascii() and tag.lower() == "xml":
        head += 3
    run_end = len(raw) - len(raw[head:].lstrip(JS_WHITESPACE))
    tail = js_rstrip(raw)
    if not tail.endswith("\n" + _FENCE):
        return raw
    close = len(tail) - len(_FENCE) - 1
    # The opening line ends at the last newline of the whitespace after the tag that still
    # leaves the closing "\n```" after it (what the original's greedy `\s*\n` picks).
    newline = raw.rfind("\n", head, min(run_end, close))
    if newline < 0:
        return raw
    return raw[newline + 1 : close]


def _tags(
    text: str, start: int, end: int, pattern: re.Pattern[str]
) -> Iterator[tuple[bool, str, int, int]]:
    """Yield (closing, name, tag_start, tag_end) for each well-formed, non-empty-element tag."""
    pos = start
    while (match := pattern.search(text, pos, end)) is not None:
        name = match.group(2)
        if name is None:
            terminator = "]]>" if match.group(0)[2] == "[" else "-->"
            close = text.find(terminator, match.end(), end)
            if close < 0:
                return
            pos = close + len(terminator)
            continue
        pos = match.end()
        closing, attributes = match.group(1) == "/", match.group(3)
        if closing:
            if js_trim(attributes):
                continue
        elif attributes and (
            attributes[0] not in JS_WHITESPACE or js_rstrip(attributes).endswith("/")
        ):
            continue
        yield closing, name.lower(), match.start(), match.end()


def _first_spans(text: str, span: Span, pattern: re.Pattern[str]) -> dict[str, Span]:
    """Content span of each name's first open tag up to the first matching close after it."""
    opened: dict[str, int] = {}
    spans: dict[str, Span] = {}
    for closing, name, tag_start, tag_end in _tags(text, *span, pattern):
        if not closing:
            opened.setdefault(name, tag_end)
        elif name in opened and name not in spans:
            spans[name] = (opened[name], tag_start)
    return spans


def _field_text(text: str, span: Span) -> str | None:
    return js_trim(xml_text_content(text, *span)) or None


def _elements(text: str, wrapper: Span | None, pattern: re.Pattern[str]) -> list[str]:
    """Every non-empty element inside the wrapper; an unclosed element ends the list."""
    if wrapper is None:
        return []
    items: list[str] = []
    content_start = -1
    for closing, _, tag_start, tag_end in _tags(text, *wrapper, pattern):
        if not closing:
            if content_start < 0:
                content_start = tag_end
        elif content_start >= 0:
            if (item := _field_text(text, (content_start, tag_start))) is not None:
                items.append(item)
            content_start = -1
    return items


def _observation(text: str, block: Span, types: dict[str, str]) -> ParsedObservation | None:
    spans = _first_spans(text, block, _OBSERVATION_TAGS)

    def scalar(name: str) -> str | None:
        span = spans.get(name)
        return None if span is None else _field_text(text, span)

    written_type = scalar("type")
    matched = None if written_type is None else types.get(written_type.lower())
    obs_type = matched if matched is not None else next(iter(types.values()))
    concepts = [
        concept
        for concept in (
            js_trim(c.split(":", 1)[0])
            for c in _elements(text, spans.get("concepts"), _CONCEPT_TAGS)
        )
        if concept and concept.lower() != obs_type.lower()
    ]
    title, narrative = scalar("title"), scalar("narrative")
    facts = _elements(text, spans.get("facts"), _FACT_TAGS)
    if title is None and narrative is None and not facts and not concepts:
        return None
    return ParsedObservation(
        type=obs_type,
        title=title,
        subtitle=scalar("subtitle"),
        facts=facts,
        narrative=narrative,
        concepts=concepts,
        files_read=_elements(text, spans.get("files_read"), _FILE_TAGS),
        files_modified=_elements(text, spans.get("files_modified"), _FILE_TAGS),
        type_fallback=matched is None,
    )


def _summary(text: str, block: Span) -> ParsedSummary | None:
    spans = _first_spans(text, block, _SUMMARY_TAGS)
    values = [
        None if name not in spans else _field_text(text, spans[name]) for name in _SUMMARY_FIELDS
    ]
    if all(value is None for value in values[:5]):
        return None
    request, investigated, learned, completed, next_steps, notes = values
    return ParsedSummary(request, investigated, learned, completed, next_steps, notes)


def _root_blocks(text: str) -> Iterator[tuple[str, int, int]]:
    """Yield (name, content_start, content_end) of each complete root block, in closing order."""
    pending: dict[str, int] = {}
    for closing, name, tag_start, tag_end in _tags(text, 0, len(text), _ROOT_TAGS):
        if not closing:
            # The earliest unclosed opener pairs with the next close (the original's lazy match).
            pending.setdefault(name, tag_end)
        elif name in pending:
            yield name, pending.pop(name), tag_start


def _type_index(valid_types: Sequence[str]) -> dict[str, str]:
    if isinstance(valid_types, str):
        raise TypeError("valid_types must be a sequence of type ids, not one string")
    index: dict[str, str] = {}
    for type_id in valid_types:
        index.setdefault(js_trim(type_id).lower(), type_id)
    if not index:
        raise ValueError("valid_types is empty: pass the mode's observation type ids")
    return index


def _invalid(reason: str) -> ParseResult:
    return ParseResult(valid=False, observations=[], summary=None, kind="invalid", reason=reason)


def parse_agent_xml(raw: object, *, valid_types: Sequence[str]) -> ParseResult:
    """Parse an observer reply; never raises on any `raw` (raises only for empty `valid_types`).

    Types match `valid_types` case-insensitively after trimming (returned as spelled there);
    a missing or unknown type becomes `valid_types[0]` with `type_fallback=True`.
    """
    types = _type_index(valid_types)
    if not isinstance(raw, str):
        return _invalid("not_text")
    if not js_trim(raw):
        return _invalid("empty")
    text = strip_code_fences(raw)

    if (skip := _SKIP.search(text)) is not None:
        written = skip.group(1) if skip.group(1) is not None else skip.group(2)
        reason = None if written is None else js_trim(decode_xml_entities(written)) or None
        skipped = ParsedSummary(None, None, None, None, None, None, True, reason)
        return ParseResult(True, [], skipped, "skip", None)

    blocks = _root_blocks(text)
    first = next(blocks, None)
    if first is None:
        return _invalid("no_complete_block" if _ROOT_MENTION.search(text) else "no_root")
    same_kind = ((a, b) for name, a, b in itertools.chain([first], blocks) if name == first[0])
    if first[0] == "summary":
        # Lazily: the first summary block with content wins, later blocks are never parsed.
        summaries = (_summary(text, block) for block in same_kind)
        summary = next((s for s in summaries if s is not None), None)
        if summary is None:
            return _invalid("summary_all_empty")
        return ParseResult(True, [], summary, "summary", None)
    observations = [o for block in same_kind if (o := _observation(text, block, types)) is not None]
    if not observations:
        return _invalid("all_observations_empty")
    return ParseResult(True, observations, None, "observations", None)
