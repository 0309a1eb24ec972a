"""Text normalisation with the original's semantics: JavaScript whitespace and XML entities."""

from __future__ import annotations

import re

# JavaScript's `\s` and `String.prototype.trim` set. Python's str.strip() differs: it also
# strips U+001C-U+001F and U+0085, and keeps U+FEFF (reference §12).
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
JS_WHITESPACE_CLASS = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
"""A regex character class equal to JavaScript's `\\s`."""

_JS_WHITESPACE_RUN = re.compile(JS_WHITESPACE_CLASS + "+")
# Where str.split()'s whitespace differs from JavaScript's: it adds U+001C-U+001F and U+0085
# and leaves out U+FEFF.
_SPLIT_DIFFERS = "\x1c\x1d\x1e\x1f\x85\ufeff"
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_ENTITY_SPLIT = re.compile(r"(&(?:lt|gt|amp|quot|apos|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});)")
_CDATA_OR_COMMENT = re.compile(r"<!(?:\[CDATA\[|--)", re.IGNORECASE)
_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
# Markdown that gives a line structure: heading marks, block quotes, fences, rules, and the
# control characters (other than whitespace) a terminal or renderer might act on.
_MARKDOWN_STRUCTURE = re.compile(
    r"(?:^|(?<=\s))#{1,6}(?=\s|$)|^(?:>+\s*)+|`{3,}|~{3,}|(?:^|(?<=\s))[-*_=]{3,}(?=\s|$)"
    r"|[\x00-\x08\x0e-\x1f\x7f]"
)


def js_trim(text: str) -> str:
    """Strip leading and trailing whitespace exactly as JavaScript's `trim()` does."""
    return text.strip(JS_WHITESPACE)


def js_rstrip(text: str) -> str:
    """Strip trailing whitespace exactly as JavaScript's `trimEnd()` does."""
    return text.rstrip(JS_WHITESPACE)


def collapse_js_whitespace(text: str) -> str:
    """Replace every run of JavaScript whitespace with one space, then trim."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # printable: the space is its only whitespace, and nothing to collapse
    if any(c in text for c in _SPLIT_DIFFERS):
        return js_trim(_JS_WHITESPACE_RUN.sub(" ", text))
    return " ".join(text.split())  # the same set here, and much faster than the regex


def one_line_plain(text: str) -> str:
    """Text as one line without Markdown structure (headings, quotes, fences, rules).

    Titles and subtitles are shown inline wherever memq injects memories into an agent; a
    title that could open a heading could pass for an instruction there.
    """
    return collapse_js_whitespace(_MARKDOWN_STRUCTURE.sub(" ", collapse_js_whitespace(text)))


def _decode_entity(match: re.Match[str]) -> str:
    named, decimal, hexadecimal = match.groups()
    if named is not None:
        return _NAMED_ENTITIES[named]
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    # NUL, surrogates and out-of-range code points are not characters: keep the text as written.
    if code == 0 or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        return match.group(0)
    return chr(code)


def decode_xml_entities(text: str) -> str:
    """Decode the five predefined XML entities and numeric references in one pass."""
    if "&" not in text:
        return text
    if "&#" not in text:
        # Named references only: no output character starts a reference and `&amp;` goes
        # last, so the chain decodes exactly what a single pass would.
        return (
            text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", '"')
            .replace("&apos;", "'")
            .replace("&amp;", "&")
        )
    # parts = [text, reference, text, …]: each distinct reference is decoded once, so a
    # flood of references costs a dict lookup each rather than a Python call per match.
    parts = _ENTITY_SPLIT.split(text)
    references = parts[1::2]
    decoded = {ref: _ENTITY.sub(_decode_entity, ref) for ref in set(references)}
    parts[1::2] = map(decoded.__getitem__, references)
    return "".join(parts)


def xml_text_content(text: str, start: int, end: int) -> str:
    """The character data of text[start:end]: CDATA unwrapped, comments dropped, entities decoded.

    An unterminated CDATA section or comment runs to `end`; other markup stays as written.
    """
    if text.find("<!", start, end) < 0:
        return decode_xml_entities(text[start:end])
    parts: list[str] = []
    pos = start
    while (match := _CDATA_OR_COMMENT.search(text, pos, end)) is not None:
        parts.append(decode_xml_entities(text[pos : match.start()]))
        is_cdata = match.group(0) != "<!--"
        terminator = "]]>" if is_cdata else "-->"
        close = text.find(terminator, match.end(), end)
        stop = end if close < 0 else close
        if is_cdata:
            parts.append(text[match.end() : stop])
        pos = end if close < 0 else close + len(terminator)
    parts.append(decode_xml_entities(text[pos:end]))
    return "".join(parts)
