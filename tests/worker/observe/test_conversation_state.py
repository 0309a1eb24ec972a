"""Which conversation a turn continues, and which request number it carries (no I/O)."""

from __future__ import annotations

import msgspec
import pytest

from pipeline.batching import Turn, plan_turns
from pipeline.events import Event
from pipeline.mode_files import load_mode
from tests.support.worker_harness import prompt, tool_call
from worker.observe.conversation import conversation_state, user_message

CODE = load_mode("code")


def _turn(*events: Event) -> Turn:
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
