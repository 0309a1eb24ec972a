"""Finding named tags in an observer reply: spans, list items and root blocks, in linear time.

A tag is `<name …>` or `</name …>` with `name` one of a set, in any case. A closing tag must
not carry attributes, an opening tag's attributes start with whitespace and it must not be
self-closing; tags inside CDATA sections and comments are text. The general scanner checks
each tag in Python. When a range holds no `<!` and every tag of the set in it is spelled
exactly `<name>`/`</name>` (the "regular" case: what observers write), the tags are exactly
those literal strings, so the same answers come from str.find, str.split and one regex pass,
without a Python step per tag.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence

import msgspec

from pipeline.replies.textnorm import JS_WHITESPACE, decode_xml_entities, xml_text_content

Span = tuple[int, int]
Tag = tuple[bool, str, int, int]
"""(closing, lower-case name, tag start, tag end)."""


class TagSet(msgspec.Struct, frozen=True):
    """The names one level of the reply cares about, with their compiled patterns."""

    names: tuple[str, ...]
    tags: re.Pattern[str]
    """A tag of `names`, a CDATA opener or a comment opener."""
    irregular: re.Pattern[str]
    """What the literal path cannot take: `<!`, or a tag of `names` not spelled literally."""
    literal: dict[str, tuple[str, str]]
    items: re.Pattern[str] | None
    """For a one-name set: the whole range as literal, alternating elements and plain text."""
    splitter: re.Pattern[str] | None
    """For a one-name set: splits at the literal tags, keeping them."""
    contents: re.Pattern[str] | None
    """For a one-name set: a literal element holding no `<`, its content as the group."""


def tag_set(*names: str) -> TagSet:
    """Compile the patterns for `names` (lower case ASCII letters and `_`)."""
    alternatives = "|".join(names)
    items = splitter = contents = None
    if len(names) == 1:
        opener, closer, text = f"<{names[0]}>", f"</{names[0]}>", _plain_text_pattern(names)
        items = re.compile(
            rf"(?:{text}{opener}{text}{closer})*+{text}(?:{opener}{text})?", re.ASCII
        )
        splitter = re.compile(f"({opener}|{closer})")
        contents = re.compile(f"{opener}([^<]*+){closer}")
    return TagSet(
        names=names,
        tags=re.compile(
            rf"<(?:!\[CDATA\[|!--|(/?)({alternatives})(?![\w.:-])([^<>]*+)>)",
            re.IGNORECASE | re.ASCII,
        ),
        irregular=irregular_pattern(names),
        literal={name: (f"<{name}>", f"</{name}>") for name in names},
        items=items,
        splitter=splitter,
        contents=contents,
    )


def _plain_text_pattern(names: Sequence[str]) -> str:
    """Regex source for text that holds no tag of `names` (in any form) and no `<!`."""
    # A `<` is text unless a tag of `names` could start there; possessive, so linear.
    alternatives = "|".join(names)
    return rf"[^<]*+(?:<(?!!|/?(?i:{alternatives})(?![\w.:-]))[^<]*+)*+"


def irregular_pattern(names: Sequence[str], *, also: str = "") -> re.Pattern[str]:
    """`<!`, or a tag of `names` not spelled `<name>`/`</name>`; `also` adds an alternative."""
    # The case-sensitive look-ahead turns a literal tag away after a few steps.
    extra = f"{also}|" if also else ""
    return re.compile(
        rf"<(?:{extra}!|/?+(?-i:(?![a-z_]++>))(?:{'|'.join(names)})(?![\w.:-])[^<>]*+>)",
        re.IGNORECASE | re.ASCII,
    )


def is_regular(text: str, span: Span, tags: TagSet) -> bool:
    """True when the literal path gives the general answers for `tags` in text[span]."""
    return tags.irregular.search(text, *span) is None


def scan_tags(text: str, start: int, end: int, tags: TagSet) -> Iterator[Tag]:
    """Every well-formed, non-empty-element tag of `tags` in text[start:end], in order."""
    resume = start  # a tag before this lies inside a CDATA section or comment
    # No match can straddle `resume` (a terminator ends in `>`, which a tag holds only as
    # its last character), so finditer sees what a search restarted there would see.
    for match in tags.tags.finditer(text, start, end):
        tag_start = match.start()
        if tag_start < resume:
            continue
        slash, name, attributes = match.groups()
        if name is None:
            terminator = "]]>" if match.group(0)[2] == "[" else "-->"
            close = text.find(terminator, match.end(), end)
            if close < 0:
                return
            resume = close + len(terminator)
            continue
        if attributes:
            # A closing tag takes none; an opening tag's start with whitespace and it must
            # not close itself.
            if slash:
                rejected = bool(attributes.strip(JS_WHITESPACE))
            else:
                trailing = attributes.rstrip(JS_WHITESPACE)
                rejected = attributes[0] not in JS_WHITESPACE or trailing.endswith("/")
            if rejected:
                continue
        yield bool(slash), name.lower(), tag_start, match.end()


def first_spans(text: str, span: Span, tags: TagSet, regular: bool) -> dict[str, Span]:
    """Content span of each name's first open tag up to the first matching close after it."""
    start, end = span
    spans: dict[str, Span] = {}
    if regular:
        for opener, closer in tags.literal.values():
            if (opened := text.find(opener, start, end)) >= 0:
                content = opened + len(opener)
                if (closed := text.find(closer, content, end)) >= 0:
                    spans[opener[1:-1]] = (content, closed)
        return spans
    opened_at: dict[str, int] = {}
    for closing, name, tag_start, tag_end in scan_tags(text, start, end, tags):
        if not closing:
            opened_at.setdefault(name, tag_end)
        elif name in opened_at and name not in spans:
            spans[name] = (opened_at[name], tag_start)
    return spans


def elements(text: str, wrapper: Span | None, item: TagSet, regular: bool) -> list[str]:
    """Trimmed text of every non-empty `item` element in the wrapper; an unclosed one ends it."""
    if wrapper is None:
        return []
    start, end = wrapper
    opener, closer = item.literal[item.names[0]]
    if item.items is not None and item.items.fullmatch(text, start, end) is not None:
        # Literal tags, alternating, between plain text (a last unclosed one is dropped).
        return _between(text[start:end], opener, closer, text.count(closer, start, end))
    if item.splitter is not None and (regular or is_regular(text, wrapper, item)):
        # parts = [text, tag, text, tag, …]: with tags alternating open/close, the items
        # are the texts after the opens (a last unclosed open is dropped).
        parts = item.splitter.split(text[start:end])
        opens, closes = parts[1::4], parts[3::4]
        if opens.count(opener) == len(opens) and closes.count(closer) == len(closes):
            return _trimmed(parts[2 : 4 * len(closes) : 4])
    items: list[str] = []
    content_start = -1
    for closing, _, tag_start, tag_end in scan_tags(text, start, end, item):
        if not closing:
            if content_start < 0:
                content_start = tag_end
        elif content_start >= 0:
            if trimmed := xml_text_content(text, content_start, tag_start).strip(JS_WHITESPACE):
                items.append(trimmed)
            content_start = -1
    return items


def literal_items(raw: str | None, item: TagSet) -> list[str]:
    """Trimmed, non-empty items of `raw`: complete literal elements and text without `<`."""
    if raw is None or item.contents is None:
        return []
    contents = item.contents.findall(raw)
    if "&" in raw:
        return _trimmed(contents)
    return list(filter(None, map(str.strip, contents, itertools.repeat(JS_WHITESPACE))))


def _between(chunk: str, opener: str, closer: str, pairs: int) -> list[str]:
    """The first `pairs` items of alternating literal elements between CDATA-free text."""
    if "\0" in chunk:
        return _trimmed(chunk.replace(closer, opener).split(opener)[1 : 2 * pairs : 2])
    # With the tags turned into NUL, one decoding call serves every item: no reference
    # spans a NUL or decodes to one. parts = [text, item, text, item, …].
    parts = decode_xml_entities(chunk.replace(opener, "\0").replace(closer, "\0")).split("\0")
    return list(
        filter(None, map(str.strip, parts[1 : 2 * pairs : 2], itertools.repeat(JS_WHITESPACE)))
    )


def _trimmed(raws: list[str]) -> list[str]:
    """Decoded, trimmed, non-empty texts of CDATA-free element contents."""
    # Decoded in one call when NUL can separate the items: no reference spans a NUL or
    # decodes to one.
    if len(raws) > 1 and (joined := "\0".join(raws)).count("\0") == len(raws) - 1:
        raws = decode_xml_entities(joined).split("\0")
    else:
        raws = [decode_xml_entities(raw) for raw in raws]
    return list(filter(None, map(str.strip, raws, itertools.repeat(JS_WHITESPACE))))


def first_kind_blocks(text: str, roots: TagSet, regular: bool) -> tuple[str, Iterator[Span]] | None:
    """The name of the first complete root block, and every block of that name in order.

    The earliest unclosed opener pairs with the next close of its name (the original's lazy
    match); openers in between are absorbed and closes without an opener are ignored.
    """
    if regular:  # one find per block, not one step per tag
        first_closes = []
        for name, (opener, closer) in roots.literal.items():
            opened = text.find(opener)
            if opened >= 0 and (closed := text.find(closer, opened + len(opener))) >= 0:
                first_closes.append((closed, name))
        if not first_closes:
            return None
        kind = min(first_closes)[1]
        return kind, _literal_blocks(text, *roots.literal[kind])
    all_blocks = _root_blocks(text, roots)
    if (first := next(all_blocks, None)) is None:
        return None
    chained = itertools.chain([first], all_blocks)
    return first[0], ((start, end) for name, start, end in chained if name == first[0])


def _root_blocks(text: str, roots: TagSet) -> Iterator[tuple[str, int, int]]:
    pending: dict[str, int] = {}
    for closing, name, tag_start, tag_end in scan_tags(text, 0, len(text), roots):
        if not closing:
            pending.setdefault(name, tag_end)
        elif name in pending:
            yield name, pending.pop(name), tag_start


def _literal_blocks(text: str, opener: str, closer: str) -> Iterator[Span]:
    pos = 0
    while (opened := text.find(opener, pos)) >= 0:
        content = opened + len(opener)
        if (closed := text.find(closer, content)) < 0:
            return
        yield content, closed
        pos = closed + len(closer)
