"""Output classifier: idle, xml, quota, auth and prose replies; reset hints; log previews."""

from __future__ import annotations

import pytest

from pipeline import (
    classify_observer_output,
    is_auth_failure_observer_output,
    is_quota_limited_observer_output,
    preview_output,
    quota_reset_hint,
)

QUOTA = [
    # the original's six orderings
    "Claude usage limit reached. Your limit will reset at 5pm (Europe/Paris).",
    "Claude Code usage limit exceeded, try again later",
    "You have exceeded your Claude usage limit",
    "Weekly limit exhausted, try again Monday",
    "You reached the weekly quota for this plan",
    "Subscription quota exceeded",
    "Quota of your subscription has been exhausted",
    "Rate limit for your weekly plan reached",
    # wordings the original missed
    "5-hour limit reached ∙ resets 3pm",
    "Session 5 hour limit reached",
    "Opus weekly limit reached ∙ resets Oct 9, 10am",
    "You've hit your limit · resets 2am",
    "Claude AI usage limit reached|1730000000",
    "You exceeded your current quota, please check your plan and billing details.",
    "Error code: 429 - {'error': {'type': 'insufficient_quota'}}",
    "Monthly spending limit reached for this organization",
    "Your credit balance is too low to access the Anthropic API.",
    "You have reached your daily usage limit",
    "CLAUDE   USAGE\n\tLIMIT\u00a0REACHED",  # case and JavaScript whitespace do not matter
]
AUTH = [
    # the original's wordings
    "Failed to authenticate. API Error: 401",
    "Authentication failed: check your credentials",
    "authentication error",
    "Auth expired, please run /login",
    "Authentication required. Run /login",
    "API Error: 403 {...}",
    "HTTP 401",
    "Request failed with status code 403",
    "status=401",
    "Please use /login to authenticate",
    "Run /login again",
    # wordings the original missed
    "Invalid API key · Please run /login",
    "401 Unauthorized",
    "403 Forbidden",
    '{"type": "error", "error": {"type": "authentication_error"}}',
    "Incorrect API key provided: sk-abc***",
]
PROSE = [
    "The agent listed the directory; nothing worth recording.",
    "Rate limit reached for requests",  # a transient 429, retried with Retry-After
    "Rate limit exceeded, retry in 20s",
    "You have exceeded your rate limit",
    "The subscription limit resets monthly",  # the original's false positive
    "Approaching usage limit · resets at 9pm",  # a warning, not a refusal
    "Claude usage limit resets every five hours",
    "The agent read the login handler at /api/login",
    # a mention of /login is not a credential failure (the original's own tests agree)
    "Please run /login in the observed project instructions.",
    "The README tells new developers to run /login before deploying.",
    "Status: 200 OK",
]


@pytest.mark.parametrize("text", QUOTA)
def test_quota_prose_is_classified_quota(text: str) -> None:
    assert classify_observer_output(text) == "quota"
    assert is_quota_limited_observer_output(text)


@pytest.mark.parametrize("text", AUTH)
def test_auth_prose_is_classified_auth(text: str) -> None:
    assert classify_observer_output(text) == "auth"
    assert is_auth_failure_observer_output(text)
    assert not is_quota_limited_observer_output(text)


@pytest.mark.parametrize("text", PROSE)
def test_other_prose_is_classified_prose(text: str) -> None:
    assert classify_observer_output(text) == "prose"
    assert not is_quota_limited_observer_output(text)
    assert not is_auth_failure_observer_output(text)


def test_quota_is_checked_before_auth() -> None:
    text = "Claude usage limit reached. Auth expired, please run /login"
    assert is_auth_failure_observer_output(text)
    assert classify_observer_output(text) == "quota"


@pytest.mark.parametrize(
    "text",
    [
        "<observation><title>weekly limit reached</title></observation>",
        "<Observation>",
        "<observation-note>",
        "<SUMMARY>Claude usage limit reached</SUMMARY>",
        "<skip_summary/>",
        "<SKIP_SUMMARY reason='x'/>",
        "Invalid API key. <summary><request>r</request></summary>",
        "<observation><title>truncated",
    ],
)
def test_a_reply_with_a_root_or_skip_tag_is_xml_and_never_quota_or_auth(text: str) -> None:
    assert classify_observer_output(text) == "xml"
    assert not is_quota_limited_observer_output(text)
    assert not is_auth_failure_observer_output(text)


@pytest.mark.parametrize(
    "text",
    ["<observations>weekly limit reached</observations>", "<summary_of_work>", "<summaryx>"],
)
def test_look_alike_tags_are_not_xml(text: str) -> None:
    assert classify_observer_output(text) != "xml"


@pytest.mark.parametrize("text", [None, 42, b"<observation>", "", " \n\t", "\ufeff\u3000"])
def test_non_text_or_blank_is_idle(text: object) -> None:
    assert classify_observer_output(text) == "idle"
    assert not is_quota_limited_observer_output(text)
    assert not is_auth_failure_observer_output(text)


def test_u0085_is_not_blank_as_in_javascript() -> None:
    assert classify_observer_output("\u0085") == "prose"


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("5-hour limit reached ∙ resets 3pm", "resets 3pm"),
        ("You've hit your limit · resets 2am", "resets 2am"),
        ("Weekly limit reached ∙ resets Oct 9, 10am", "resets Oct 9, 10am"),
        ("Claude AI usage limit reached|1730000000", "1730000000"),
        ("Claude AI usage limit reached | 1730000000", "1730000000"),
        (
            "Claude usage limit reached. Your limit will reset at 5pm (Europe/Paris). Try later",
            "reset at 5pm (Europe/Paris)",
        ),
        ("Usage limit reached, resets at 10.30am.", "resets at 10.30am"),
        ("Weekly limit reached, try again in 3 hours", "try again in 3 hours"),
        ("Monthly spending limit reached", None),
        ("insufficient_quota", None),
        ("", None),
    ],
)
def test_quota_reset_hint_extracts_the_raw_fragment(text: str, hint: str | None) -> None:
    assert quota_reset_hint(text) == hint


@pytest.mark.parametrize(
    ("raw", "max_chars", "preview"),
    [
        (None, 200, "(non-string output: NoneType)"),
        ({"a": 1}, 200, "(non-string output: dict)"),
        ("  a \n\n b\t\u3000c  ", 200, "a b c"),
        ("abcdef", 6, "abcdef"),
        ("abcdefgh", 6, "abcdef…(+2 chars)"),
        ("ab  cd", 3, "ab …(+2 chars)"),  # measured after collapsing
        ("", 200, ""),
    ],
)
def test_preview_is_one_line_and_cut_with_a_count(
    raw: object, max_chars: int, preview: str
) -> None:
    assert preview_output(raw, max_chars) == preview


def test_preview_defaults_to_200_chars() -> None:
    assert preview_output("x" * 250) == "x" * 200 + "…(+50 chars)"
