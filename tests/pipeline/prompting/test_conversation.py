"""Which conversation a turn continues, which request number it carries, the bounded history."""

from __future__ import annotations

import re

import msgspec
import pytest

from pipeline.events import Event
from pipeline.prompting.conversation import (
    DIGEST_CHARS,
    DIGEST_ITEMS,
    Exchange,
    ObserverState,
    bounded_digest,
    bounded_history,
    conversation_state,
    user_message,
)
from pipeline.prompting.mode_files import load_mode
from pipeline.turns.batching import TurnPlan, plan_turns
from tests.support.worker_harness import prompt, tool_call

CODE = load_mode("code")


def _turn(*events: Event) -> TurnPlan:
    (turn,) = plan_turns(list(events), max_tool_calls=8, max_chars=100_000)
    return turn


@pytest.mark.parametrize("number", [None, 0, 1])
def test_an_opening_request_is_number_one_and_not_announced_again(number: int | None) -> None:
    # The Claude Code hook never numbers prompts: the first one must still be 1, told once.
    opening = msgspec.structs.replace(prompt("s1", 1, "add a login form"), prompt_number=number)
    turn = _turn(opening, tool_call("s1", 2))
    state = conversation_state(CODE, "s1", None, turn)
    _, new_request = user_message(CODE, turn, state, 4000)
    assert (state.prompt_number, state.told_prompt_number) == (1, 1)
    assert state.user_request == "add a login form"
    assert "add a login form" in state.system
    assert new_request is None


def test_the_next_unnumbered_request_is_number_two_and_told_once() -> None:
    events = [
        prompt("s2", 0, "first request"),
        tool_call("s2", 1),
        prompt("s2", 0, "second request"),
        tool_call("s2", 2),
    ]
    first, second = plan_turns(events, max_tool_calls=8, max_chars=100_000)
    state = conversation_state(CODE, "s2", None, first)
    assert user_message(CODE, first, state, 4000)[1] is None
    state = conversation_state(CODE, "s2", state, second)
    _, new_request = user_message(CODE, second, state, 4000)
    assert (state.prompt_number, state.user_request) == (2, "second request")
    assert new_request is not None
    assert new_request.prompt_number == 2


@pytest.mark.parametrize(
    ("turns", "max_turns", "max_chars", "kept"),
    [
        (5, 2, 10_000, [3, 4]),
        (5, 0, 10_000, []),
        (5, 10, 10_000, [0, 1, 2, 3, 4]),
        (5, 10, 25, [3, 4]),  # each turn is 11 chars: the char cap drops the oldest
        (1, 3, 5, []),  # a single turn over the cap is dropped too
    ],
)
def test_history_keeps_the_newest_turns_within_both_limits(
    turns: int, max_turns: int, max_chars: int, kept: list[int]
) -> None:
    history = [Exchange(user=f"user {i}", assistant=f"obs {i}") for i in range(turns)]
    bounded = bounded_history(history, max_turns, max_chars)
    assert bounded == [history[i] for i in kept]


def test_the_observer_sees_every_call_the_current_request_and_what_is_recorded() -> None:
    # The quality guard of the cheap conversation (no raw history): each turn still carries
    # every tool call's content within the field budget, the user's current request (in the
    # system prompt, or as a new request), and the session's recorded observations.
    budget = 4_000
    calls = [tool_call("s3", n, output=f"line {n} " + "x" * (budget + 500)) for n in range(3)]
    first = _turn(prompt("s3", 1, "make the login test pass"), *calls)
    state = conversation_state(CODE, "s3", None, first)
    assert "make the login test pass" in state.system
    state.digest = ["bugfix: Login test failed on a missing CSRF token"]
    message, _ = user_message(CODE, first, state, budget)
    for n in range(3):
        assert f"line {n} " + "x" * int(budget * 0.6 - 10) in message  # its head, within budget
    assert len(re.findall(r'<elided chars="\d+"', message)) == 3
    assert "- bugfix: Login test failed on a missing CSRF token" in message
    later = _turn(prompt("s3", 2, "now the signup test"), tool_call("s3", 9))
    state = conversation_state(CODE, "s3", state, later)
    message, told = user_message(CODE, later, state, budget)
    assert told is not None
    assert "now the signup test" in message
    assert "bugfix: Login test failed" in message


def test_what_is_recorded_keeps_the_newest_lines_within_its_bounds() -> None:
    lines = [f"discovery: step {n} " + "y" * 150 for n in range(100)]
    kept = bounded_digest(lines)
    assert kept == lines[-len(kept) :]
    assert len(kept) <= DIGEST_ITEMS
    assert sum(map(len, kept)) <= DIGEST_CHARS


def test_the_digest_keeps_its_stored_name_so_saved_states_still_load() -> None:
    saved = b'{"system":"s","recorded":["discovery: Ran the build"]}'  # as memq saved it before
    state = msgspec.json.decode(saved, type=ObserverState)
    assert state.digest == ["discovery: Ran the build"]
    assert msgspec.json.decode(msgspec.json.encode(state))["recorded"] == state.digest
