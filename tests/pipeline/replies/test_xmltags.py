"""Tag finding: the literal fast paths give exactly what the per-tag scanner gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import parse_agent_xml
from pipeline.replies.xmltags import elements, first_kind_blocks, first_spans, is_regular, tag_set

TYPES = ("bugfix", "feature", "discovery")
SETTINGS = settings(max_examples=200, deadline=None)
NAMES = (
    "observation", "summary", "type", "title", "subtitle", "narrative", "facts", "fact",
    "concepts", "concept", "files_read", "files_modified", "file", "request", "learned",
)  # fmt: skip
TEXTS = [
    "x", " ", "\n  ", "bugfix", "Feature", "gotcha: why", "&amp;", "&lt;b&gt;", "&#60;",
    "&#0;", "&", "\x00", "a < b", "<b>", "</b>", "<fact", "\u00a0", "\u3000", "é",
]  # fmt: skip
# Literal tags only, so a reply built from these takes the fast paths.
regular_reply = st.lists(
    st.one_of(
        st.sampled_from([f"<{name}>" for name in NAMES] + [f"</{name}>" for name in NAMES]),
        st.sampled_from(TEXTS),
    ),
    max_size=60,
).map("".join)
skeleton_reply = st.lists(
    st.sampled_from(
        [
            "<observation>",
            "</observation>",
            "<type>bugfix</type>",
            "<title>T &amp; U</title>",
            "<subtitle>s</subtitle>",
            "<narrative> n </narrative>",
            "<facts>",
            "</facts>",
            "<fact>f</fact>",
            "<fact> </fact>",
            "<concepts>",
            "</concepts>",
            "<concept>gotcha: x</concept>",
            "<concept>bugfix</concept>",
            "<files_read>",
            "</files_read>",
            "<files_modified>",
            "</files_modified>",
            "<file>a.py</file>",
            "\n  ",
        ]
    ),
    max_size=40,
).map("".join)


def _with_comments(reply: str) -> str:
    # A comment after every opener changes no field's text but sends every level of the
    # reply down the per-tag path.
    for name in NAMES:
        reply = reply.replace(f"<{name}>", f"<{name}><!---->")
    return reply


@SETTINGS
@given(st.one_of(regular_reply, skeleton_reply))
def test_literal_paths_parse_like_the_per_tag_path(reply: str) -> None:
    assert parse_agent_xml(reply, valid_types=TYPES) == parse_agent_xml(
        _with_comments(reply), valid_types=TYPES
    )


@SETTINGS
@given(regular_reply)
def test_literal_spans_and_blocks_equal_scanned_ones(reply: str) -> None:
    span = (0, len(reply))
    fields, roots = tag_set("type", "title", "facts"), tag_set("observation", "summary")
    assert is_regular(reply, span, fields)
    assert is_regular(reply, span, roots)
    assert first_spans(reply, span, fields, True) == first_spans(reply, span, fields, False)
    literal, scanned = first_kind_blocks(reply, roots, True), first_kind_blocks(reply, roots, False)
    assert (literal is None) == (scanned is None)
    if literal is not None and scanned is not None:
        assert (literal[0], list(literal[1])) == (scanned[0], list(scanned[1]))


@pytest.mark.parametrize(
    ("content", "items"),
    [
        # long lists are decoded in one call: NUL, `&#0;` and entities stay per item
        (
            "".join(f"<fact>{i} &amp; {i}</fact>" for i in range(40)),
            [f"{i} & {i}" for i in range(40)],
        ),
        ("<fact>a\x00b</fact>" * 20, ["a\x00b"] * 20),
        ("<fact>&#0;</fact><fact> </fact>" * 20, ["&#0;"] * 20),
        ("<fact>&#60;fact&#62;</fact>" * 20 + "<fact>open", ["<fact>"] * 20),
        # other `<` inside items: the tags are still literal
        ("<fact>Vec<u8></fact><fact>a < b</fact>", ["Vec<u8>", "a < b"]),
        ("<fact>a < b</fact><fact>unclosed", ["a < b"]),
        ("<fact>a<fact>b</fact></fact><fact>c</fact>", ["a<fact>b", "c"]),
        ("</fact><fact>a</fact>", ["a"]),
    ],
)
def test_list_items(content: str, items: list[str]) -> None:
    assert elements(content, (0, len(content)), tag_set("fact"), False) == items
