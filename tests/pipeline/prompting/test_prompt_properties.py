"""Properties: any tool call frames as well-formed XML; truncation and hashing hold their rules."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import (
    Mode,
    ToolCall,
    build_observation_prompt,
    compute_observation_content_hash,
    render_tool_field,
)
from pipeline.prompting.mode_files import load_mode
from pipeline.prompting.truncate import split_observation_field

CODE = load_mode("code")
SETTINGS = settings(max_examples=200, deadline=None)

# Any code point but surrogates (which JSON and hosts cannot carry), biased towards the
# characters that matter to XML and to the characters XML 1.0 cannot carry.
_char = st.one_of(
    st.sampled_from("<>&\"'/=!-[]{}\t\n\r \x00\x07\x1b\x1f\ufffe\uffff\u200d\u0301"),
    st.characters(exclude_categories=["Cs"]),
)
_text = st.text(_char, max_size=60)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_field = st.one_of(_json, _text.map(lambda s: "{" + s), _text.map(lambda s: f'["{s}"]'))
_when = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@st.composite
def _calls(draw: st.DrawFn) -> ToolCall:
    return ToolCall(
        event_id="e",
        memory_session_id="s",
        project="p",
        occurred_at=draw(_when),
        tool_name=draw(st.text(_char, min_size=1, max_size=40)),
        tool_input=draw(_field),
        tool_output=draw(_field),
        cwd=draw(_text),
    )


def _as_parsed(text: str) -> str:
    """What an XML parser hands back for text we framed: U+FFFD for forbidden characters,
    and XML's end-of-line normalisation of CR."""
    return _NOT_XML.sub("\ufffd", text).replace("\r\n", "\n").replace("\r", "\n")


def _framing(message: str, mode: Mode) -> ET.Element:
    suffix = "\n\n" + mode.prompts.observation_instruction
    assert message.endswith(suffix)
    return ET.fromstring(f"<root>{message.removesuffix(suffix)}</root>")


@SETTINGS
@given(calls=st.lists(_calls(), min_size=1, max_size=5), budget=st.integers(0, 120))
def test_any_batch_frames_as_exactly_its_elements(calls: list[ToolCall], budget: int) -> None:
    root = _framing(build_observation_prompt(calls, mode=CODE, field_budget_chars=budget), CODE)
    assert [child.tag for child in root] == ["observed_from_primary_session"] * len(calls)
    for call, element in zip(calls, root, strict=True):
        expected = ["what_happened", "occurred_at", "parameters", "outcome"]
        if call.cwd:
            expected.insert(2, "working_directory")
        assert [child.tag for child in element] == expected
        assert element.findtext("what_happened") == _as_parsed(call.tool_name)
        if call.cwd:
            assert element.findtext("working_directory") == _as_parsed(call.cwd)
        for tag, value in (("parameters", call.tool_input), ("outcome", call.tool_output)):
            field = element.find(tag)
            assert field is not None
            cut = split_observation_field(value, budget)
            if cut.elided_chars:
                (marker,) = list(field)
                assert marker.tag == "elided"
                assert marker.attrib["chars"] == str(cut.elided_chars)
                assert (field.text or "") == _as_parsed(cut.head + "\n... ")
                assert (marker.tail or "") == _as_parsed(" ...\n" + cut.tail)
            else:
                assert len(field) == 0
                assert (field.text or "") == _as_parsed(render_tool_field(value))


@SETTINGS
@given(text=st.text(st.characters(), max_size=400), max_chars=st.integers(0, 300))
def test_truncation_keeps_a_prefix_and_a_suffix_within_budget(text: str, max_chars: int) -> None:
    cut = split_observation_field(text, max_chars)
    assert text.startswith(cut.head)
    assert text.endswith(cut.tail)
    assert len(cut.head) + cut.elided_chars + len(cut.tail) == len(text)
    assert cut.original_size_chars == len(text)
    if len(text) <= max_chars:
        assert (cut.text, cut.elided_chars) == (text, 0)
    else:
        assert len(cut.head) <= math.floor(max_chars * 0.6)
        assert len(cut.tail) <= math.floor(max_chars * 0.3)
        assert cut.elided_chars > 0


_words = st.lists(st.text(st.characters(categories=["L", "N"]), min_size=1), max_size=6)
_space = st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u3000", " \r\n "])


@SETTINGS
@given(title=_words, narrative=_words, gaps=st.lists(_space, min_size=16, max_size=16))
def test_hash_ignores_how_words_are_spaced(
    title: list[str], narrative: list[str], gaps: list[str]
) -> None:
    def spaced(words: list[str], offset: int) -> str:
        return gaps[offset] + "".join(w + gaps[offset + i + 1] for i, w in enumerate(words))

    plain = compute_observation_content_hash("s", " ".join(title), " ".join(narrative))
    assert compute_observation_content_hash("s", spaced(title, 0), spaced(narrative, 8)) == plain
