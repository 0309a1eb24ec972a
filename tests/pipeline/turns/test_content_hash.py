"""Content hash: the original's formula on plain text, normalised text, facts-only rows."""

from __future__ import annotations

import hashlib
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import compute_observation_content_hash
from pipeline.turns.content_hash import normalize_hash_text


def _original(session: str, title: str | None, narrative: str | None) -> str:
    """The original formula, written out directly from its description."""
    material = f"{session}\x00{title or ''}\x00{narrative or ''}"
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]


@pytest.mark.parametrize(
    ("session", "title", "narrative", "expected"),
    [
        # printf 's1\0Fixed the bug\0The parser now accepts tabs' | sha256sum
        ("s1", "Fixed the bug", "The parser now accepts tabs", "94ba9a779a6ca5f7"),
        # printf 's1\0\0' | sha256sum
        ("s1", None, None, "93eed21b3c901762"),
        ("s1", "", "", "93eed21b3c901762"),
    ],
)
def test_known_vectors(
    session: str, title: str | None, narrative: str | None, expected: str
) -> None:
    assert compute_observation_content_hash(session, title, narrative) == expected


@pytest.mark.parametrize(
    ("session", "title", "narrative"),
    [
        ("sess-1", "Upload client retries 5 times", "Backoff doubles from 200 ms."),
        ("sess-1", "Only a title", None),
        ("sess-1", None, "Only a narrative, with punctuation: a=1; b=[2]"),
        ("abc", "", "narrative"),
        ("", "title", "narrative"),
    ],
)
def test_plain_ascii_matches_the_original_formula(
    session: str, title: str | None, narrative: str | None
) -> None:
    assert compute_observation_content_hash(session, title, narrative) == _original(
        session, title, narrative
    )


@pytest.mark.parametrize(
    ("title", "narrative", "variant_title", "variant_narrative"),
    [
        ("Fixed the bug", "It works", "  Fixed   the\tbug \n", "It\n\nworks"),
        ("Fixed the bug", "It works", "Fixed\u00a0the\u3000bug", "It\u2028works\ufeff"),
        ("fix", "ABC 12", "\ufb01x", "\uff21\uff22\uff23 \uff11\uff12"),  # ligature, fullwidth
        ("caf\u00e9", "x", "cafe\u0301", "x"),  # composed vs decomposed
    ],
)
def test_spacing_and_compatibility_forms_do_not_change_the_hash(
    title: str, narrative: str, variant_title: str, variant_narrative: str
) -> None:
    assert compute_observation_content_hash(
        "s", variant_title, variant_narrative
    ) == compute_observation_content_hash("s", title, narrative)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("s1", "t", "n"), ("s2", "t", "n")),
        (("s", "t1", "n"), ("s", "t2", "n")),
        (("s", "t", "n1"), ("s", "t", "n2")),
        (("s", "ab", ""), ("s", "a", "b")),
        (("s", "Fix", "x"), ("s", "fix", "x")),  # case is content
    ],
)
def test_different_content_hashes_differently(
    a: tuple[str, str, str], b: tuple[str, str, str]
) -> None:
    assert compute_observation_content_hash(*a) != compute_observation_content_hash(*b)


def test_facts_only_observations_no_longer_collapse_into_one() -> None:
    first = compute_observation_content_hash("s", None, None, ["Redis runs on port 6380"])
    second = compute_observation_content_hash("s", None, None, ["Tests need REDIS_URL"])
    assert first != second
    assert first == compute_observation_content_hash("s", "", " ", ["Redis  runs on port 6380"])
    assert first == _original("s", None, "Redis runs on port 6380")


@pytest.mark.parametrize(
    ("facts", "other"),
    [
        (["a", "b"], ["b", "a"]),
        (["a b"], ["a", "b"]),
    ],
)
def test_facts_keep_their_order_and_boundaries(facts: list[str], other: list[str]) -> None:
    assert compute_observation_content_hash("s", None, None, facts) != (
        compute_observation_content_hash("s", None, None, other)
    )


@pytest.mark.parametrize(("title", "narrative"), [("A title", None), (None, "A narrative")])
def test_facts_do_not_count_when_there_is_a_title_or_narrative(
    title: str | None, narrative: str | None
) -> None:
    with_facts = compute_observation_content_hash("s", title, narrative, ["one", "two"])
    assert with_facts == compute_observation_content_hash("s", title, narrative)


def test_no_title_narrative_or_facts_hashes_like_the_original() -> None:
    assert compute_observation_content_hash("s", None, None, []) == _original("s", None, None)
    assert compute_observation_content_hash("s", None, None, [" ", ""]) == _original("s", "", "")


@pytest.mark.parametrize("title", ["\ud800 lone surrogate", "emoji \U0001f44d", "\x00"])
def test_any_text_gives_sixteen_lowercase_hex_digits(title: str) -> None:
    digest = compute_observation_content_hash("s", title, None)
    assert len(digest) == 16
    assert set(digest) <= set("0123456789abcdef")


def test_a_lone_surrogate_hashes_as_the_replacement_character_like_node() -> None:
    assert compute_observation_content_hash("s", "a\ud800", None) == (
        compute_observation_content_hash("s", "a\ufffd", None)
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "a",
                "é",
                "ﬁ",
                " ",
                "\t",
                "\n",
                "\x1c",
                "\x1f",
                "\x85",
                "\xa0",
                "\u2028",
                "\u3000",
                "\ufeff",
            ]
        ),
        max_size=20,
    ).map("".join)
)
def test_normalised_text_collapses_exactly_its_whitespace_set(text: str) -> None:
    run = "[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+"
    expected = re.sub(run, " ", unicodedata.normalize("NFKC", text)).strip(" ")
    assert normalize_hash_text(text) == expected
