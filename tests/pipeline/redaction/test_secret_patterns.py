"""The anchor fast path: a full scan is skipped only where its pattern cannot match."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import find_secrets, redact_secrets
from pipeline.redaction.names import KEY_QUALIFIERS, SECRET_WORDS
from pipeline.redaction.patterns import SECRET_PATTERNS, SecretPattern
from tests.support.secret_samples import LOOKALIKES, POSITIVES, Positive

# Ordinary tool output of several shapes, none holding a secret or an anchor.
_PYTEST = "".join(
    f"tests/test_cart.py::test_discount_{i} PASSED in 0.{i:02d}s (cart total 90.00)\n"
    for i in range(40)
)
_JSON = msgspec.json.format(
    msgspec.json.encode([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(40)])
).decode()
_SOURCE = (
    "def total(cart: Cart, discount: float = 0.0) -> Decimal:\n"
    "    # Passed through unchanged when the cart is empty.\n"
    "    return sum((line.price * line.quantity for line in cart.lines), Decimal(0))\n"
) * 20
_FILLERS = (_PYTEST, _JSON, _SOURCE)


def _spans(pattern: SecretPattern, text: str) -> list[tuple[int, int]]:
    return list(pattern.find(text))


def _covered(spans: list[tuple[int, int]]) -> set[int]:
    return {i for start, end in spans for i in range(start, end)}


def _assert_anchored(text: str) -> None:
    """Every pattern that finds something in `text` has an anchor in it."""
    folded = text.lower()
    for pattern in SECRET_PATTERNS:
        if _spans(pattern, text):
            assert pattern.may_occur_in(folded), (pattern.kind, text[:80])


def test_every_anchor_is_lower_case_as_the_text_it_is_searched_in() -> None:
    for pattern in SECRET_PATTERNS:
        assert pattern.anchors, pattern.kind
        for anchor in pattern.anchors:
            assert anchor.pattern == anchor.pattern.lower(), (pattern.kind, anchor.pattern)


@pytest.mark.parametrize("case", POSITIVES, ids=lambda p: f"{p.kind}:{p.text[:24]}")
def test_every_corpus_secret_has_its_kinds_anchor(case: Positive) -> None:
    for text in (case.text, case.text.upper(), case.text.swapcase()):
        _assert_anchored(text)
    folded = case.text.lower()
    assert any(p.may_occur_in(folded) for p in SECRET_PATTERNS if p.kind == case.kind)


_NAMES = [*SECRET_WORDS, *(f"{q}_key" for q in sorted(KEY_QUALIFIERS)), "apiKey", "x-auth-token"]


@pytest.mark.parametrize("name", _NAMES)
@pytest.mark.parametrize(
    "form", ["{}=Zx9vQ2rT7k", '{}: "Zx9vQ2rT7k"', "{} := 'Zx9vQ2rT7k'", "{}?=>Zx9vQ2rT7k"]
)
def test_every_secret_name_is_anchored_in_any_case(name: str, form: str) -> None:
    for cased in (name, name.upper(), name.title()):
        text = "db." + form.format(cased)
        _assert_anchored(text)
        assert "Zx9vQ2rT7k" not in redact_secrets(text), text


@pytest.mark.parametrize("filler", _FILLERS, ids=["pytest", "json", "source"])
def test_ordinary_tool_output_runs_no_full_scan(filler: str) -> None:
    folded = filler.lower()
    assert [p.kind for p in SECRET_PATTERNS if p.may_occur_in(folded)] == []
    assert redact_secrets(filler) == filler


@pytest.mark.parametrize("case", POSITIVES, ids=lambda p: f"{p.kind}:{p.text[:24]}")
@pytest.mark.parametrize("where", ["alone", "first", "middle", "last"])
def test_a_secret_in_a_large_text_is_caught_wherever_it_sits(case: Positive, where: str) -> None:
    noise = (_PYTEST + _JSON + _SOURCE) * 40  # ~300 KB without an anchor
    text = {
        "alone": case.text,
        "first": f"{case.text}\n{noise}",
        "middle": f"{noise[: len(noise) // 2]}\n{case.text}\n{noise[len(noise) // 2 :]}",
        "last": f"{noise}\n{case.text}",
    }[where]
    assert case.kind in {m.kind for m in find_secrets(text)}
    out = redact_secrets(text)
    assert case.secret not in out
    assert f"[REDACTED:{case.kind}]" in out


@pytest.mark.parametrize("case", POSITIVES, ids=lambda p: f"{p.kind}:{p.text[:24]}")
def test_a_secret_straddling_the_short_text_length_is_caught(case: Positive) -> None:
    # Short texts are first checked with one search for any anchor; long ones are not.
    for size in (255, 256, 257, 258):
        pad = max(0, size - len(case.text) - 1)
        for text in (f"{'x' * pad} {case.text}", f"{case.text} {'x' * pad}"):
            assert case.secret not in redact_secrets(text), (size, text)


@pytest.mark.parametrize("case", POSITIVES, ids=lambda p: f"{p.kind}:{p.text[:24]}")
def test_spans_stay_right_when_lower_casing_changes_the_length(case: Positive) -> None:
    # "İ".lower() is two characters: the anchors see a longer text than the patterns.
    prefix = "İ" * 300 + " "
    text = prefix + case.text
    assert len(text.lower()) > len(text)
    out = redact_secrets(text)
    assert out.startswith(prefix)
    assert out[len(prefix) :] == redact_secrets(case.text)


_NOISE = st.sampled_from(
    [c.text for c in LOOKALIKES]
    + ["=", ":", " ", '"', "'", "-", "_", "/", "+", ".", "@", "\n", "x", "A", "9", "İ"]
    + [
        "token",
        "PASSWORD",
        "Passwd",
        "pwd",
        "passphrase",
        "apiKey",
        "Secret_Access_Key",
        "AUTHORIZATION: basic ",
        "BEARER ",
    ]
    + ["sk-", "AIza", "eyJ", "://u:", "-----BEGIN RSA ", "XOXB-", "npm_", "rk_live_"]
    + ["ya29.", "hf_", "xapp-", "whsec_", "pypi-AgE", "SG.", "hvs.", "dop_v1_", "shpat_", "dapi"]
    + ["AGE-SECRET-KEY-1", "glpat-", "key-", "1Q~", "123456789:AA", "-----END EC PRIVATE KEY-----"]
    + ["--password ", "--api-key=", "mysql -p", "docker login -p ", "vault login ", "-u a:"]
    + ["machine h login u password ", "Authorization: Token ", "Cookie: ", "sessionid="]
    + ["kind: Secret\ndata:\n  a: ", '"kind": "Secret", "data": {"a": "', "AccountKey=", "&sig="]
    + ["https://", "@", "#", "?", "&", "PGPASSWORD=", "API_KEY_2=", "client-key-data: ", "auth: "]
)
_FRAGMENTS = st.one_of(_NOISE, st.sampled_from([p.text for p in POSITIVES]))
_CASINGS: list[Callable[[str], str]] = [str, str.upper, str.lower, str.swapcase]
_CASED = st.sampled_from(_CASINGS)
_TEXT = st.one_of(
    st.text(max_size=80),
    st.tuples(st.lists(_FRAGMENTS, max_size=12).map("".join), _CASED).map(lambda t: t[1](t[0])),
    st.tuples(st.sampled_from(_FILLERS), st.lists(_FRAGMENTS, min_size=1, max_size=6)).map(
        lambda t: t[0][:300] + "".join(t[1]) + t[0][300:600]
    ),
)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_anchors_never_hide_a_match(text: str) -> None:
    _assert_anchored(text)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_find_secrets_covers_what_every_full_scan_finds(text: str) -> None:
    # The reference runs every pattern on every text, without anchors.
    reference = _covered([span for p in SECRET_PATTERNS for span in _spans(p, text)])
    assert _covered([(m.start, m.end) for m in find_secrets(text)]) == reference
