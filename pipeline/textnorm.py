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
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_CDATA_OR_COMMENT = re.compile(r"<!(?:\[CDATA\[|--)", re.IGNORECASE)
_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def js_trim(text: str) -> str:
    """Strip leading and trailing whitespace exactly as JavaScript's `trim()` does."""
    return text.strip(JS_WHITESPACE)


def js_rstrip(text: str) -> str:
    """Strip trailing whitespace exactly as JavaScript's `trimEnd()` does."""
    return text.rstrip(JS_WHITESPACE)


def collapse_js_whitespace(text: str) -> str:
    """Replace every run of JavaScript whitespace with one space, then trim."""
    return js_trim(_JS_WHITESPACE_RUN.sub(" ", text))


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
    return _ENTITY.sub(_decode_entity, text)


def xml_text_content(text: str, start: int, end: int) -> str:
    """The character data of text[start:end]: CDATA unwrapped, comments dropped, entities decoded.

    An unterminated CDATA section or comment runs to `end`; other markup stays as written.
    """
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
