"""Injection-safe framing: tool values rendered once as text, then escaped for the prompt's XML.

Order of operations for a tool field (see `pipeline.prompting.prompts`): `render_tool_field`
turns the value into text, `pipeline.prompting.truncate` cuts that text to its budget (so the
budget counts the tool's own characters, not escapes), and only then is each kept piece escaped
with `escape_xml_text`; the elision marker is inserted between the escaped pieces, unescaped, so
it is a real element while a look-alike inside tool output stays inert text.

Escaping makes every interpolated value plain XML 1.0 character data:
- `&`, `<` and `>` become `&amp;`, `&lt;` and `&gt;`, so no value can open or close an element;
- characters XML 1.0 cannot carry (C0 controls other than tab, LF and CR; lone surrogates;
  U+FFFE and U+FFFF) become U+FFFD, one character for one, so lengths and budgets hold.
  ANSI colour codes (ESC) thus show as U+FFFD followed by e.g. `[31m`.
CR is kept as is: XML parsers read it as a line feed (end-of-line normalisation).
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

REPLACEMENT_CHARACTER = "\ufffd"

_NOT_XML_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_XML_ASCII = b"\t\n\r" + bytes(range(0x20, 0x80))


def escape_xml_text(text: str) -> str:
    """Escape `&`, `<`, `>` and replace characters XML 1.0 forbids with U+FFFD."""
    # ASCII text is checked as bytes (translate deletes the allowed ones): a regex scan
    # of a character class costs several times more per character.
    if (
        text.encode("ascii").translate(None, _XML_ASCII)
        if text.isascii()
        else _NOT_XML_CHAR.search(text) is not None
    ):
        text = _NOT_XML_CHAR.sub(REPLACEMENT_CHARACTER, text)
    # Chained replace (`&` first) is one pass in effect and ~30x faster than str.translate
    # with multi-character replacements, which looks every character up in a dict.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_tool_field(value: object) -> str:
    """Render a tool input or output as text: JSON objects/arrays pretty-printed once, text raw.

    A string holding a JSON object or array is parsed once and pretty-printed (no double
    encoding); any other string is shown as it is; None is empty; other values are JSON.
    The text is what `json.dumps(…, indent=2, ensure_ascii=False)` writes.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        # Only containers: turning the text "1e5" into 100000.0 or " 7 " into 7 would change
        # what the tool printed without making anything easier to read.
        if not value.lstrip().startswith(("{", "[")):
            return value
        shown = _pretty_json_text(value)
        return value if shown is None else shown
    return _pretty_value(msgspec.to_builtins(value, str_keys=True, enc_hook=str))


# Speed: json.dumps(indent=2) runs the pure-Python encoder. msgspec writes strings, integers,
# booleans and null exactly as json does (checked for every code point) and re-indents
# JSON by copying its tokens; only floats differ (`1e16` for `1e+16`, NaN as null), so
# floats are read back through a hook that writes them as json does.


def _json_float(token: str) -> msgspec.Raw:
    number = float(token)
    if not math.isfinite(number):  # `1e400`: json writes Infinity, which msgspec won't indent
        raise ValueError(f"JSON number {token} is out of range")
    return msgspec.Raw(repr(number).encode())


_AS_JSON_WRITES = msgspec.json.Decoder(float_hook=_json_float)
_LONG_TEXT_CHARS = 16_384


def _pretty_json_text(text: str) -> str | None:
    """json.dumps(json.loads(text), indent=2, ensure_ascii=False); None if not a container."""
    try:
        parsed = _AS_JSON_WRITES.decode(text)
        if not isinstance(parsed, dict | list):
            return None
        return _indented(msgspec.json.encode(parsed))
    except (ValueError, RecursionError):
        pass  # what msgspec refuses but json reads (NaN, 1e400, lone-surrogate escapes)
    import json  # here, not at the top: the Claude Code hook never reaches this

    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _pretty_json(parsed) if isinstance(parsed, dict | list) else None


def _pretty_value(value: object) -> str:
    # Long strings are escaped by json in one C call each: its pure-Python encoder is then
    # the faster one (tool outputs hold their text one or two levels down).
    if not _holds_long_text(value, depth=2):
        try:
            written = msgspec.json.encode(value)
            # msgspec writes NaN and ±inf as null: only a value without null has none.
            if b"null" not in written:
                return _indented(msgspec.json.encode(_AS_JSON_WRITES.decode(written)))
        except (ValueError, RecursionError):  # lone surrogates, huge integers, deep nesting
            pass
    return _pretty_json(value)


def _holds_long_text(value: object, depth: int) -> bool:
    if isinstance(value, str):
        return len(value) > _LONG_TEXT_CHARS
    if depth and isinstance(value, dict):
        return any(_holds_long_text(item, depth - 1) for item in value.values())
    return False


def _indented(written: bytes) -> str:
    return msgspec.json.format(written, indent=2).decode("utf-8")


def _pretty_json(value: Any) -> str:
    import json  # here, not at the top: the Claude Code hook never reaches this

    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except RecursionError:
        # Pathologically deep nesting: the C encoder still manages it, compactly.
        return msgspec.json.encode(value).decode("utf-8", "replace")
