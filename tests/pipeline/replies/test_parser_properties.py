"""Properties of the parser: total on any input, self-consistent results, lossless round trip."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import ParseResult, parse_agent_xml, strip_code_fences
from pipeline.replies.parser import PARSE_FAILURE_REASONS
from pipeline.replies.textnorm import JS_WHITESPACE_CLASS, js_trim, one_line_plain

TYPES = ("bugfix", "feature", "security_alert")
SETTINGS = settings(max_examples=200, deadline=None)

FRAGMENTS = [
    "<observation>",
    "</observation>",
    "<Observation id='1'>",
    "</OBSERVATION >",
    "<observation/>",
    "<observations>",
    "<summary>",
    "</summary>",
    '<summary lang="en">',
    "<skip_summary",
    " reason='",
    ' reason="',
    "/>",
    "<skip_summary/>",
    *(f"<{tag}>" for tag in ("type", "title", "subtitle", "narrative", "facts", "fact")),
    *(f"</{tag}>" for tag in ("type", "title", "subtitle", "narrative", "facts", "fact")),
    *(f"<{tag}>" for tag in ("concepts", "concept", "files_read", "files_modified", "file")),
    *(f"</{tag}>" for tag in ("concepts", "concept", "files_read", "files_modified", "file")),
    *(f"<{tag}>" for tag in ("request", "investigated", "learned", "completed", "next_steps")),
    *(f"</{tag}>" for tag in ("request", "investigated", "learned", "completed", "next_steps")),
    "<notes>",
    "</notes>",
    "<![CDATA[",
    "]]>",
    "<!--",
    "-->",
    "&amp;",
    "&lt;",
    "&#x41;",
    "&#0;",
    "&",
    "```xml\n",
    "\n```",
    ":",
    " ",
    "\n",
    "\u0085",
    "\ufeff",
    "\u3000",
    "bugfix",
    "Feature",
    "[ bugfix | feature ]",
    "<",
    ">",
]
xmlish = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=40).map(
    "".join
)


def assert_consistent(result: ParseResult) -> None:
    assert isinstance(result, ParseResult)
    assert result.valid == (result.kind != "invalid")
    assert bool(result.observations) == (result.kind == "observations")
    assert (result.summary is not None) == (result.kind in ("summary", "skip"))
    assert (result.reason is None) == result.valid
    assert result.reason is None or result.reason in PARSE_FAILURE_REASONS
    for o in result.observations:
        assert o.type in TYPES
        assert_scalars(o.title, o.subtitle, o.narrative)
        assert_items(o.facts, o.concepts, o.files_read, o.files_modified)
        assert o.title or o.narrative or o.facts or o.concepts
        assert all(":" not in c and c.lower() != o.type for c in o.concepts)
    if result.summary is not None:
        s = result.summary
        texts = (s.request, s.investigated, s.learned, s.completed, s.next_steps, s.notes)
        assert_scalars(*texts, s.skip_reason)
        assert s.skipped == (result.kind == "skip")
        if s.skipped:
            assert texts == (None,) * 6
        else:
            assert s.skip_reason is None
            assert any(t is not None for t in texts[:5])


def assert_scalars(*values: str | None) -> None:
    for value in values:
        assert value is None or (value != "" and js_trim(value) == value)


def assert_items(*lists: list[str]) -> None:
    for items in lists:
        assert all(item != "" and js_trim(item) == item for item in items)


@SETTINGS
@given(st.text())
def test_any_text_parses_to_a_consistent_result(raw: str) -> None:
    assert_consistent(parse_agent_xml(raw, valid_types=TYPES))


@SETTINGS
@given(xmlish)
def test_xml_like_text_parses_to_a_consistent_result(raw: str) -> None:
    assert_consistent(parse_agent_xml(raw, valid_types=TYPES))


@SETTINGS
@given(st.one_of(st.none(), st.integers(), st.binary(), st.lists(st.text())))
def test_non_text_is_rejected_not_raised(raw: object) -> None:
    assert parse_agent_xml(raw, valid_types=TYPES).reason == "not_text"


# --- round trip ----------------------------------------------------------------------------

field_text = st.text(max_size=30)


def escape(text: str, numeric: bool) -> str:
    """XML-escape as a model might: named entities, or numeric character references."""
    if numeric:
        return text.replace("&", "&#38;").replace("<", "&#x3C;").replace(">", "&#62;")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def scalar(text: str) -> str | None:
    return js_trim(text) or None


def items(texts: list[str]) -> list[str]:
    return [js_trim(t) for t in texts if js_trim(t)]


@st.composite
def observations(draw: st.DrawFn) -> tuple[str, dict[str, object]]:
    """A rendered <observation> and the fields the parser should read back from it."""
    numeric = draw(st.booleans())
    obs_type = draw(st.sampled_from(TYPES))
    written_type = draw(st.sampled_from([obs_type, obs_type.upper(), f"\n  {obs_type} "]))
    scalars = {name: draw(field_text) for name in ("title", "subtitle", "narrative")}
    sizes = {"facts": 4, "concepts": 4, "files_read": 3, "files_modified": 3}
    lists = {name: draw(st.lists(field_text, max_size=size)) for name, size in sizes.items()}
    element = {"facts": "fact", "concepts": "concept", "files_read": "file"}
    parts = [f"<type>{written_type}</type>"]
    parts += [f"<{name}>{escape(text, numeric)}</{name}>" for name, text in scalars.items()]
    for name, texts in lists.items():
        tag = element.get(name, "file")
        inner = "".join(f"<{tag}>{escape(t, numeric)}</{tag}>" for t in texts)
        parts.append(f"<{name}>{inner}</{name}>")
    order = draw(st.permutations(parts))
    concepts = [js_trim(c.split(":", 1)[0]) for c in lists["concepts"]]
    expected: dict[str, object] = {name: scalar(text) for name, text in scalars.items()}
    for name in ("title", "subtitle"):  # one line of plain text (no Markdown structure)
        value = expected[name]
        expected[name] = one_line_plain(value) or None if isinstance(value, str) else None
    expected |= {name: items(texts) for name, texts in lists.items() if name != "concepts"}
    expected["concepts"] = [c for c in concepts if c and c.lower() != obs_type]
    expected["type"] = obs_type
    return "<observation>\n" + "\n".join(order) + "\n</observation>", expected


@SETTINGS
@given(observations())
def test_an_escaped_observation_parses_back_to_its_fields(
    case: tuple[str, dict[str, object]],
) -> None:
    raw, expected = case
    result = parse_agent_xml(raw, valid_types=TYPES)
    if not (
        expected["title"] or expected["narrative"] or expected["facts"] or expected["concepts"]
    ):
        assert result.reason == "all_observations_empty"
        return
    assert len(result.observations) == 1
    observation = result.observations[0]
    got = {name: getattr(observation, name) for name in expected}
    assert got == expected
    assert observation.type_fallback is False


@SETTINGS
@given(observations(), st.sampled_from(["```xml\n", "```\n", "  ```XML \r\n"]))
def test_fencing_a_reply_does_not_change_its_parse(
    case: tuple[str, dict[str, object]], opening: str
) -> None:
    raw, _ = case
    fenced = f"{opening}{raw}\n```\n"
    assert parse_agent_xml(fenced, valid_types=TYPES) == parse_agent_xml(raw, valid_types=TYPES)


# --- fences against the original's regex ---------------------------------------------------

W = JS_WHITESPACE_CLASS
ORIGINAL_FENCE = re.compile(
    rf"\A{W}*```(?:xml)?{W}*\n(.*?)\n```{W}*\Z", re.DOTALL | re.IGNORECASE | re.ASCII
)
FENCE_FRAGMENTS = ["```", "`", "xml", "XML", "xMl", "json", "\n", "\r\n", " ", "\t", "\u00a0",
                   "\ufeff", "\u0085", "\u2028", "a", "<a/>", "~~~"]  # fmt: skip


def pieces(*options: str, max_size: int = 4) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(options), max_size=max_size).map("".join)


fence_like = st.one_of(
    pieces(*FENCE_FRAGMENTS, max_size=14),
    st.tuples(
        pieces(" ", "\t", "\n", "\ufeff", "\u0085", "x", max_size=3),
        st.sampled_from(["```", "````", "~~~"]),
        st.sampled_from(["", "xml", "XML", "json", " xml"]),
        pieces(" ", "\n", "\n", "\r\n", "\u2028", "\u0085"),
        pieces(*FENCE_FRAGMENTS, max_size=6),
        st.sampled_from(["\n```", "\n```", "```", "\n````", "\r\n```", "\n``` x"]),
        pieces(" ", "\n", "\ufeff", "\u0085", "x", max_size=3),
    ).map("".join),
)


@SETTINGS
@given(fence_like)
def test_fence_stripping_matches_the_original_regex(raw: str) -> None:
    match = ORIGINAL_FENCE.match(raw)
    assert strip_code_fences(raw) == (raw if match is None else match.group(1))
