"""Framing: tool values rendered once as text, and escaped into XML character data."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import escape_xml_text, render_tool_field


class _Thing(msgspec.Struct):
    name: str
    size: int


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        # JSON text holding an object or array: parsed once, pretty-printed once
        ('{"command":"ls"}', '{\n  "command": "ls"\n}'),
        (
            '  {"a": [1, {"b": null}]}\n',
            '{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ]\n}',
        ),
        ("[]", "[]"),
        ('{"name": "caf\\u00e9 \\u00fc"}', '{\n  "name": "café ü"\n}'),
        # other text: shown exactly as the tool produced it
        ("plain text", "plain text"),
        ("  indented\n\tlines  ", "  indented\n\tlines  "),
        ('"a JSON string literal"', '"a JSON string literal"'),
        ('"{\\"command\\":\\"ls\\"}"', '"{\\"command\\":\\"ls\\"}"'),  # parsed once: a string
        ("42", "42"),
        ("1e5", "1e5"),
        ("null", "null"),
        ("{not json", "{not json"),
        ("[1, 2", "[1, 2"),
        ("", ""),
        # other values: JSON, two-space indent, non-ASCII kept
        (None, ""),
        ({"command": "ls"}, '{\n  "command": "ls"\n}'),
        (["ü", 2.5, True, None], '[\n  "ü",\n  2.5,\n  true,\n  null\n]'),
        ({}, "{}"),
        (7, "7"),
        (False, "false"),
        ({1: "one"}, '{\n  "1": "one"\n}'),
        (_Thing(name="x", size=3), '{\n  "name": "x",\n  "size": 3\n}'),
        (datetime(2025, 1, 2, tzinfo=UTC), '"2025-01-02T00:00:00Z"'),
    ],
)
def test_render_tool_field(value: object, shown: str) -> None:
    assert render_tool_field(value) == shown


def test_json_text_nested_beyond_the_parser_is_shown_raw() -> None:
    text = "[" * 100_000
    assert render_tool_field(text) == text


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("a < b > c & d", "a &lt; b &gt; c &amp; d"),
        ("</outcome>", "&lt;/outcome&gt;"),
        ("&lt;", "&amp;lt;"),
        ("]]>", "]]&gt;"),
        ("quotes \" and ' stay", "quotes \" and ' stay"),
        ("tab\tnewline\ncr\r", "tab\tnewline\ncr\r"),
        ("nul\x00", "nul\ufffd"),
        ("\x1b[31mred\x1b[0m", "\ufffd[31mred\ufffd[0m"),
        ("\x01\x08\x0b\x0c\x0e\x1f", "\ufffd" * 6),
        ("lone \ud800 surrogate \udfff", "lone \ufffd surrogate \ufffd"),
        ("\ufffe\uffff", "\ufffd\ufffd"),
        ("\x7f\x85 kept", "\x7f\x85 kept"),
        ("emoji \U0001f44d\U0001f3fd and 漢字", "emoji \U0001f44d\U0001f3fd and 漢字"),
        ("", ""),
    ],
)
def test_escape_xml_text(text: str, escaped: str) -> None:
    assert escape_xml_text(text) == escaped


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ('<a href="x">&amp;</a>', '<a href="x">&amp;</a>'),
        ("bell\x07", "bell\ufffd"),
        ("line\r\nbreak", "line\nbreak"),  # XML end-of-line handling, not ours
        (
            "\U0001f468\u200d\U0001f469\u200d\U0001f467",
            "\U0001f468\u200d\U0001f469\u200d\U0001f467",
        ),
    ],
)
def test_escaped_text_parses_back_as_plain_character_data(text: str, parsed: str) -> None:
    element = ET.fromstring(f"<field>{escape_xml_text(text)}</field>")
    assert (element.text, len(element)) == (parsed, 0)


@pytest.mark.parametrize("text", ["a\x00b\x1bc", "\ud83d", "x" * 10])
def test_escaping_replaces_one_character_with_one(text: str) -> None:
    escaped = escape_xml_text(text)
    assert len(escaped) == len(text)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()  # NaN and ±inf too
    | st.text(max_size=8),  # lone surrogates and control characters too
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


json_containers = st.lists(json_values, max_size=3) | st.dictionaries(
    st.text(max_size=4), json_values
)


@settings(max_examples=100, deadline=None)
@given(json_containers)
def test_values_are_pretty_printed_exactly_as_json_dumps_does(value: object) -> None:
    assert render_tool_field(value) == json.dumps(value, indent=2, ensure_ascii=False)


@settings(max_examples=100, deadline=None)
@given(json_containers)
def test_json_text_is_read_exactly_as_json_loads_reads_it(
    value: list[object] | dict[str, object],
) -> None:
    text = json.dumps(value)  # NaN, Infinity and \ud800 escapes included
    shown = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    assert render_tool_field(text) == shown


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(max_codepoint=0x7F)) | st.text())
def test_escaping_matches_its_definition(text: str) -> None:
    replaced = re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "\ufffd", text)
    expected = replaced.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert escape_xml_text(text) == expected


@pytest.mark.parametrize("depth", [100, 900, 980, 990, 995, 1000, 1010, 1100, 5000])
def test_json_text_nested_near_the_recursion_limit_is_shown_whole(depth: int) -> None:
    text = "[" * depth + "]" * depth
    assert "".join(render_tool_field(text).split()) == text  # pretty-printed or raw


@pytest.mark.parametrize(
    "value",
    [
        {"stdout": 'line "quoted" é\n' * 2000, "code": 0, "ratio": 1e16},
        {"file": {"content": "x\ty\\z\n" * 5000, "startLine": 1.5}},
        [{"content": "short"}, 0.1, 1e-7, None],
        {"nan": float("nan"), "inf": float("-inf")},
    ],
)
def test_long_and_short_values_render_exactly_as_json_dumps(value: object) -> None:
    assert render_tool_field(value) == json.dumps(value, indent=2, ensure_ascii=False)
