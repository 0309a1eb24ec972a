"""Field truncation: the original's 60/30 arithmetic, the marker, grapheme-safe cuts."""

from __future__ import annotations

import json
import string

import pytest

from pipeline import truncate_observation_field
from pipeline.prompting.truncate import split_observation_field


def _text(length: int) -> str:
    """Distinct-looking ASCII so a wrong slice shows up as wrong content."""
    alphabet = string.ascii_letters + string.digits
    return "".join(alphabet[i % len(alphabet)] for i in range(length))


def _marker(elided: int, original: int) -> str:
    attributes = f'chars="{elided}" original_size_chars="{original}" reason="oversize"'
    return f"\n... <elided {attributes} /> ...\n"


@pytest.mark.parametrize("length", [0, 1, 9_999, 16_000])
def test_text_within_the_default_budget_is_unchanged(length: int) -> None:
    text = _text(length)
    assert truncate_observation_field(text) == text


@pytest.mark.parametrize(
    ("max_chars", "length", "head", "tail", "elided"),
    [
        (16_000, 16_001, 9_600, 4_800, 1_601),
        (16_000, 100_000, 9_600, 4_800, 85_600),
        (1_000, 1_001, 600, 300, 101),
        (100, 101, 60, 30, 11),
        (10, 11, 6, 3, 2),
        (7, 8, 4, 2, 2),  # floor(4.2) and floor(2.1)
        (3, 10, 1, 0, 9),  # no tail at all: floor(0.9) == 0
        (1, 5, 0, 0, 5),
        (0, 1, 0, 0, 1),
    ],
)
def test_oversize_text_keeps_head_and_tail_around_the_marker(
    max_chars: int, length: int, head: int, tail: int, elided: int
) -> None:
    text = _text(length)
    expected = text[:head] + _marker(elided, length) + text[length - tail :]
    assert truncate_observation_field(text, max_chars) == expected


def test_one_char_over_the_default_costs_14400_plus_the_marker() -> None:
    out = truncate_observation_field(_text(16_001))
    assert len(out) == 14_400 + len(_marker(1_601, 16_001))
    assert len(out) == 14_479  # the original's figure for the same input


def test_the_budget_is_measured_on_the_rendered_value() -> None:
    value = {"log": "x" * 50, "lines": list(range(20))}
    rendered = json.dumps(value, indent=2)
    assert truncate_observation_field(value, len(rendered)) == rendered
    cut = split_observation_field(value, len(rendered) - 1)
    assert cut.original_size_chars == len(rendered)
    assert rendered.startswith(cut.head)
    assert rendered.endswith(cut.tail)


@pytest.mark.parametrize(("value", "expected"), [(None, ""), ('{"a":1}', '{\n  "a": 1\n}')])
def test_values_are_rendered_before_measuring(value: object, expected: str) -> None:
    assert truncate_observation_field(value) == expected


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        truncate_observation_field("abc", -1)


THUMBS_UP_MEDIUM = "\U0001f44d\U0001f3fd"  # thumbs up + skin tone modifier
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # man ZWJ woman ZWJ girl
FLAG_JP = "\U0001f1ef\U0001f1f5"  # two regional indicators
E_ACUTE = "e\u0301"  # e + combining acute accent
HEART_EMOJI = "\u2764\ufe0f"  # heart + emoji variation selector


@pytest.mark.parametrize(
    ("cluster", "offset"),
    [
        (THUMBS_UP_MEDIUM, 1),
        (FAMILY, 1),
        (FAMILY, 2),
        (FAMILY, 3),
        (FAMILY, 4),
        (FLAG_JP, 1),
        (E_ACUTE, 1),
        (HEART_EMOJI, 1),
        ("\r\n", 1),
    ],
)
def test_the_head_cut_moves_before_a_cluster_it_would_split(cluster: str, offset: int) -> None:
    # max 100 -> head 60: the cluster starts `offset` characters before index 60
    text = "h" * (60 - offset) + cluster + "m" * 200 + "t" * 30
    cut = split_observation_field(text, 100)
    assert cut.head == "h" * (60 - offset)
    assert cut.tail == "t" * 30
    assert cut.elided_chars == len(text) - len(cut.head) - 30


@pytest.mark.parametrize(
    ("cluster", "offset"),
    [
        (THUMBS_UP_MEDIUM, 1),
        (FAMILY, 1),
        (FAMILY, 2),
        (FAMILY, 3),
        (FAMILY, 4),
        (FLAG_JP, 1),
        (E_ACUTE, 1),
        (HEART_EMOJI, 1),
        ("\r\n", 1),
    ],
)
def test_the_tail_cut_moves_after_a_cluster_it_would_split(cluster: str, offset: int) -> None:
    # max 100 -> tail 30: the tail would start `offset` characters into the cluster
    after = "t" * (30 - (len(cluster) - offset))
    text = "h" * 60 + "m" * 200 + cluster + after
    cut = split_observation_field(text, 100)
    assert cut.head == "h" * 60
    assert cut.tail == after
    assert cut.elided_chars == len(text) - 60 - len(after)
    assert cut.text == cut.head + _marker(cut.elided_chars, len(text)) + cut.tail


@pytest.mark.parametrize("cluster", [THUMBS_UP_MEDIUM, FAMILY, FLAG_JP, E_ACUTE])
def test_a_cluster_that_ends_at_the_cut_is_kept(cluster: str) -> None:
    text = "h" * (60 - len(cluster)) + cluster + "m" * 200 + "t" * 30
    assert split_observation_field(text, 100).head == text[:60]


def test_two_flags_in_a_row_are_cut_between_the_flags() -> None:
    text = "h" * 58 + FLAG_JP + FLAG_JP + "m" * 200  # cut at 60 falls between the two flags
    assert split_observation_field(text, 100).head == "h" * 58 + FLAG_JP


def test_an_overlong_mark_run_is_cut_where_the_arithmetic_says() -> None:
    text = "z" + "\u0301" * 2_000  # one "cluster" far longer than the 64-code-point limit
    cut = split_observation_field(text, 1_000)
    assert (cut.head, cut.tail) == (text[:600], text[-300:])


def test_a_short_mark_run_moves_the_cut_to_its_base() -> None:
    text = "h" * 50 + "z" + "\u0301" * 40 + "m" * 200
    assert split_observation_field(text, 100).head == "h" * 50


def test_lone_surrogates_are_counted_and_cut_like_any_character() -> None:
    text = "\ud800" * 101
    cut = split_observation_field(text, 100)
    assert (len(cut.head), len(cut.tail), cut.elided_chars) == (60, 30, 11)
