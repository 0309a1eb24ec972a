"""Text normalisation: entity decoding and whitespace collapsing, checked against their rules."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.replies.textnorm import JS_WHITESPACE, collapse_js_whitespace, decode_xml_entities

SETTINGS = settings(max_examples=200, deadline=None)
NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
REFERENCE = re.compile(r"&(lt|gt|amp|quot|apos|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});")


def _decode_once(text: str) -> str:
    """The rule, one match at a time: decoded text is never read again."""

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        if body in NAMED:
            return NAMED[body]
        code = int(body[2:], 16) if body[1] in "xX" else int(body[1:])
        valid = 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF
        return chr(code) if valid else match.group(0)

    return REFERENCE.sub(one, text)


entityish = st.lists(
    st.sampled_from(
        [
            "&amp;",
            "&lt;",
            "&gt;",
            "&quot;",
            "&apos;",
            "&amp;lt;",
            "&#38;",
            "&#38;lt;",
            "&#60;",
            "&#x3C;",
            "&#X3c;",
            "&#0;",
            "&#xD800;",
            "&#1114112;",
            "&#12345678;",
            "&#x110000;",
            "&",
            "#",
            ";",
            "lt;",
            "&AMP;",
            "\x00",
            "a",
            " ",
            "é",
        ]
    ),
    max_size=30,
).map("".join)


@SETTINGS
@given(st.one_of(entityish, st.text(max_size=40)))
def test_entities_decode_in_one_pass(text: str) -> None:
    assert decode_xml_entities(text) == _decode_once(text)


@pytest.mark.parametrize(
    ("text", "decoded"),
    [
        ("&amp;lt; stays an entity", "&lt; stays an entity"),
        ("&#38;amp; too", "&amp; too"),
        ("&lt;&#60;&#x3C;", "<<<"),
        ("&#0; &#xD800; &#x110000;", "&#0; &#xD800; &#x110000;"),
    ],
)
def test_decoded_text_is_never_decoded_again(text: str, decoded: str) -> None:
    assert decode_xml_entities(text) == decoded


spaced = st.lists(
    st.sampled_from([*JS_WHITESPACE, "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "a", "b", "é"]),
    max_size=30,
).map("".join)


@SETTINGS
@given(spaced)
def test_collapsing_uses_exactly_the_javascript_whitespace_set(text: str) -> None:
    expected = re.sub(f"[{re.escape(JS_WHITESPACE)}]+", " ", text).strip(JS_WHITESPACE)
    assert collapse_js_whitespace(text) == expected


@pytest.mark.parametrize(
    ("text", "collapsed"),
    [
        (" a \t\n b ", "a b"),
        ("a\x1cb\x85c", "a\x1cb\x85c"),  # not JavaScript whitespace, though str.split() splits
        ("\ufeffa\ufeff b", "a b"),  # JavaScript whitespace, though str.split() keeps it
    ],
)
def test_collapse_js_whitespace(text: str, collapsed: str) -> None:
    assert collapse_js_whitespace(text) == collapsed
