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
# Every scan is str.find, str.split or a possessive regex: linear in the reply. Tag finding
# (and its fast path for the usual, literally spelled tags) is pipeline.replies.xmltags.

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from pipeline.replies.textnorm import (
    JS_WHITESPACE,
    JS_WHITESPACE_CLASS,
    decode_xml_entities,
    js_rstrip,
    js_trim,
    one_line_plain,
    xml_text_content,
)
from pipeline.replies.xmltags import (
    Span,
    elements,
    first_kind_blocks,
    first_spans,
    irregular_pattern,
    is_regular,
    literal_items,
    tag_set,
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

_SUMMARY_FIELDS = ("request", "investigated", "learned", "completed", "next_steps", "notes")
_ROOTS = tag_set("observation", "summary")
_OBSERVATION = tag_set(
    "type", "title", "subtitle", "narrative", "facts", "concepts", "files_read", "files_modified"
)
_SUMMARY = tag_set(*_SUMMARY_FIELDS)
_FACT, _CONCEPT, _FILE = tag_set("fact"), tag_set("concept"), tag_set("file")
# One pass over the reply tells whether every level is regular (the usual case; a block of
# an irregular reply is still checked on its own) and whether a skip may be written.
_SKIP_OR_IRREGULAR = irregular_pattern(
    (*_ROOTS.names, *_OBSERVATION.names, "fact", "concept", "file", *_SUMMARY_FIELDS),
    also="skip_summary",
)
# An observation block's check covers its lists too.
_OBSERVATION_AND_ITEMS = tag_set(*_OBSERVATION.names, "fact", "concept", "file")
_SKELETON_ORDER = (
    "type", "title", "subtitle", "facts", "narrative", "concepts", "files_read", "files_modified"
)  # fmt: skip
_LISTS = (
    ("facts", _FACT),
    ("concepts", _CONCEPT),
    ("files_read", _FILE),
    ("files_modified", _FILE),
)


def _canonical_pattern() -> re.Pattern[str]:
    # The skeleton's layout: each field at most once and in its order, literal tags, lists
    # of complete items, no other `<`. The general reading of such a block gives each group
    # as that field's content. (Allowing a stray `<` here costs more on every reply than
    # the per-field path costs on the few that have one.)
    text = "[^<]*+"
    items = {wrapper: item.names[0] for wrapper, item in _LISTS}
    fields = []
    for name in _SKELETON_ORDER:
        item = items.get(name)
        body = text if item is None else f"(?:{text}<{item}>{text}</{item}>)*+{text}"
        fields.append(f"(?:<{name}>({body})</{name}>{text})?")
    return re.compile(text + "".join(fields))


_CANONICAL = _canonical_pattern()


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


def _trimmed(raw: str | None) -> str | None:
    return None if raw is None else decode_xml_entities(raw).strip(JS_WHITESPACE) or None


def _field_text(text: str, span: Span | None, regular: bool) -> str | None:
    if span is None:
        return None
    raw = decode_xml_entities(text[span[0] : span[1]]) if regular else xml_text_content(text, *span)
    return raw.strip(JS_WHITESPACE) or None


_Fields = tuple[
    str | None, str | None, str | None, str | None, list[str], list[str], list[str], list[str]
]
"""type, title, subtitle, narrative (trimmed, None when empty) and the four lists' items."""


def _fields(text: str, block: Span, regular: bool) -> _Fields:
    if (canonical := _CANONICAL.fullmatch(text, *block)) is not None:
        kind, title, subtitle, facts, narrative, concepts, read, modified = canonical.groups()
        return (
            _trimmed(kind), _trimmed(title), _trimmed(subtitle), _trimmed(narrative),
            literal_items(facts, _FACT), literal_items(concepts, _CONCEPT),
            literal_items(read, _FILE), literal_items(modified, _FILE),
        )  # fmt: skip
    regular = regular or is_regular(text, block, _OBSERVATION_AND_ITEMS)
    spans = first_spans(text, block, _OBSERVATION, regular)
    kind, title, subtitle, narrative = (
        _field_text(text, spans.get(name), regular)
        for name in ("type", "title", "subtitle", "narrative")
    )
    facts, concepts, read, modified = (
        elements(text, spans.get(wrapper), item, regular) for wrapper, item in _LISTS
    )
    return kind, title, subtitle, narrative, facts, concepts, read, modified


def _observation(
    text: str, block: Span, types: dict[str, str], regular: bool
) -> ParsedObservation | None:
    written, title, subtitle, narrative, facts, concept_texts, read, modified = _fields(
        text, block, regular
    )
    matched = None if written is None else types.get(written.lower())
    obs_type = matched if matched is not None else next(iter(types.values()))
    concepts = concept_texts and _concepts(concept_texts, obs_type.lower())
    # One line of plain text each: a reply talked into "Fix login\n\n## IMPORTANT: …" must
    # not become a heading wherever the title is shown.
    title, subtitle = (one_line_plain(t) or None if t else None for t in (title, subtitle))
    if title is None and narrative is None and not facts and not concepts:
        return None
    # Positional: this runs once per observation, and keywords cost measurably more.
    return ParsedObservation(
        obs_type, title, subtitle, facts, narrative, concepts, read, modified, matched is None
    )  # fmt: skip


def _concepts(texts: list[str], lowered_type: str) -> list[str]:
    """Each concept cut at its first ':', trimmed; empty ones and the type itself dropped."""
    return [
        concept
        for concept in (text.split(":", 1)[0].strip(JS_WHITESPACE) for text in texts)
        if concept and concept.lower() != lowered_type
    ]


def _summary(text: str, block: Span, regular: bool) -> ParsedSummary | None:
    regular = regular or is_regular(text, block, _SUMMARY)
    spans = first_spans(text, block, _SUMMARY, regular)
    values = [_field_text(text, spans.get(name), regular) for name in _SUMMARY_FIELDS]
    if all(value is None for value in values[:5]):
        return None
    request, investigated, learned, completed, next_steps, notes = values
    return ParsedSummary(request, investigated, learned, completed, next_steps, notes)


def _type_index(valid_types: Sequence[str]) -> dict[str, str]:
    if isinstance(valid_types, str):
        raise TypeError("valid_types must be a sequence of type ids, not one string")
    index: dict[str, str] = {}
    for type_id in valid_types:
        index.setdefault(type_id.strip(JS_WHITESPACE).lower(), type_id)
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

    hit = _SKIP_OR_IRREGULAR.search(text)
    if hit is not None and (skip := _SKIP.search(text)) is not None:
        written = skip.group(1) if skip.group(1) is not None else skip.group(2)
        reason = None if written is None else js_trim(decode_xml_entities(written)) or None
        skipped = ParsedSummary(None, None, None, None, None, None, True, reason)
        return ParseResult(True, [], skipped, "skip", None)

    regular = hit is None
    found = first_kind_blocks(text, _ROOTS, regular or is_regular(text, (0, len(text)), _ROOTS))
    if found is None:
        return _invalid("no_complete_block" if _ROOT_MENTION.search(text) else "no_root")
    kind, same_kind = found
    if kind == "summary":
        # Lazily: the first summary block with content wins, later blocks are never parsed.
        summaries = (_summary(text, block, regular) for block in same_kind)
        summary = next((s for s in summaries if s is not None), None)
        if summary is None:
            return _invalid("summary_all_empty")
        return ParseResult(True, [], summary, "summary", None)
    observations = [
        o for block in same_kind if (o := _observation(text, block, types, regular)) is not None
    ]
    if not observations:
        return _invalid("all_observations_empty")
    return ParseResult(True, observations, None, "observations", None)
