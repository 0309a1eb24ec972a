"""Privacy tags: withheld regions leave no trace; nesting, case, attributes, unclosed tags."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import (
    PRIVATE_TAG_NAMES,
    is_entirely_private,
    strip_private_tags,
    strip_private_value,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a<private>secret</private>b", "ab"),
        ("<private>only</private>", ""),
        ("keep  <private>x</private>  spaces ", "keep    spaces "),  # no trimming
        ("a<private>1</private>b<private>2</private>c", "abc"),
        ("x<private note='why' level=2>y</private>z", "xz"),
        ("x<private\n>y</private>z", "xz"),
        ("a<private>\nmulti\nline\n</private>b", "ab"),
        ("x<PRIVATE>y</Private>z", "xz"),
        ("x<Claude-Mem-Context>y</claude-mem-context>z", "xz"),
        ("<system_instruction>a</system_instruction>b", "b"),
        ("<system-instruction>a</system-instruction>b", "b"),
        ("<persisted-output>a</persisted-output>b", "b"),
        ("<system-reminder>a</system-reminder>b", "b"),
        ("<memq-context>a</memq-context>b", "b"),
        ("<claude-mem-context>a</claude-mem-context>b", "b"),
    ],
)
def test_withheld_regions_are_removed(text: str, expected: str) -> None:
    assert strip_private_tags(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<private>a<private>b</private>c</private>d", "d"),
        ("<private>a<PRIVATE>b</private>c</Private>d", "d"),
        ("<private>a<private>b<private>c</private></private></private>!", "!"),
        ("<private>a<system-reminder>b</private>c</system-reminder>", "c</system-reminder>"),
        ("<system-reminder>a<private>b</private>c</system-reminder>d", "d"),
    ],
)
def test_same_name_tags_nest_and_other_names_do_not(text: str, expected: str) -> None:
    assert strip_private_tags(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("before <private>the rest is private", "before "),
        ("a<private>b<private>c</private>d", "a"),
        ("ok</private>still ok", "ok</private>still ok"),
        ("a<private/>b", "ab"),
        ("a<private />b", "ab"),
    ],
)
def test_unclosed_openers_hide_the_rest_and_stray_closers_stay(text: str, expected: str) -> None:
    assert strip_private_tags(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "<private-notes>kept</private-notes>",
        "<privately>kept</privately>",
        "<system>kept</system>",
        "if a < b and c > d",
        "x <b>bold</b> y",
        "no tags at all",
        "",
        "<Private",
    ],
)
def test_text_without_withheld_tags_is_unchanged(text: str) -> None:
    assert strip_private_tags(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Removing the inner region would fuse `<priv` + `ate>` into a new opener.
        ("<priv<private>x</private>ate>secret</private>", "ate>secret</private>"),
        ("a <<private>x</private>private>s</private>", "a private>s</private>"),
        ("<private x <p<private/>rivate>y</private>", "rivate>y</private>"),
        # A `<` that can never become a withheld tag is kept.
        ("x <b <private>y</private>z", "x <b z"),
        ("if a <<private>x</private>= b", "if a = b"),
    ],
)
def test_fragments_that_would_fuse_into_a_new_tag_are_dropped(text: str, expected: str) -> None:
    assert strip_private_tags(text) == expected
    assert strip_private_tags(expected) == expected


def test_every_listed_tag_name_is_withheld() -> None:
    for name in PRIVATE_TAG_NAMES:
        assert strip_private_tags(f"a<{name}>b</{name}>c") == "ac", name


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x<private>y</private>", "x"),
        (["<private>a</private>b", 1, None, True], ["b", 1, None, True]),
        (
            {"cmd": "echo <private>tok</private>", "n": 2.5, "nested": [{"k": "<private>v"}]},
            {"cmd": "echo ", "n": 2.5, "nested": [{"k": ""}]},
        ),
        ({"<private>key</private>name": "v"}, {"name": "v"}),
        (42, 42),
        (None, None),
    ],
)
def test_json_values_are_stripped_in_every_string(value: object, expected: object) -> None:
    assert strip_private_value(value) == expected


def test_stripping_a_json_value_does_not_mutate_it() -> None:
    value = {"a": ["<private>x</private>"]}
    strip_private_value(value)
    assert value == {"a": ["<private>x</private>"]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<private>all of it</private>", True),
        ("  <private>a</private>\n<system-reminder>b</system-reminder>\ufeff", True),
        ("<private>unclosed to the end", True),
        ("<private>a</private> but this", False),
        ("", False),
        ("   ", False),
        ("plain", False),
    ],
)
def test_entirely_private_means_content_that_strips_to_blank(text: str, expected: bool) -> None:
    assert is_entirely_private(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        "<private" * 200_000,
        "<private>" * 120_000,
        "<" * 1_000_000 + "<private></private>",
        "<private x" * 100_000 + ">",
        "<<<<p" * 200_000 + "<private></private>",
        "<private aaaa" + "a" * 500_000 + "<private></private>" * 20_000,
    ],
    ids=["openers-no-gt", "nested-openers", "lt-run", "attrs", "lt-p-runs", "long-tail"],
)
def test_megabyte_adversarial_inputs_strip_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    strip_private_tags(text)
    assert time.perf_counter() - started < 1.0


_FRAGMENTS = st.sampled_from(
    [
        *("<private>", "</private>", "<PRIVATE a='1'>", "<private/>", "<priv", "ate>", "<", ">"),
        *("</system-reminder>", "<system-reminder>", "<memq-context>", "</memq-context>"),
        *("x", " ", "\n", "secret", "/", "-notes>"),
    ]
)
_TEXT = st.one_of(st.text(max_size=60), st.lists(_FRAGMENTS, max_size=30).map("".join))


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_stripping_never_raises_and_is_idempotent(text: str) -> None:
    once = strip_private_tags(text)
    assert strip_private_tags(once) == once


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_FRAGMENTS, max_size=15).map("".join),
    st.sampled_from(PRIVATE_TAG_NAMES),
    st.lists(_FRAGMENTS, max_size=15).map("".join),
)
def test_content_of_a_withheld_region_never_survives(before: str, name: str, after: str) -> None:
    text = f"{before}<{name}>SEKRIT</{name}>{after}"
    assert "SEKRIT" not in strip_private_tags(text)
