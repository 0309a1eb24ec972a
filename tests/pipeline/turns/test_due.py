"""When waiting events make a turn due: a full batch, a request boundary, or a long wait."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.turns.due import BatchPolicy, Waiting, due_at_ms, is_due

POLICY = BatchPolicy(max_events=8, max_chars=60_000, max_wait_ms=30_000)


def waiting(*kinds: str, size: int = 3_000, start_ms: int = 1_000) -> Waiting:
    times = [start_ms + 100 * n for n in range(len(kinds))]
    return Waiting(kinds=kinds, sizes=[size] * len(kinds), published_ms=times)


def test_a_few_tool_calls_wait_for_more_until_the_oldest_has_waited_long_enough() -> None:
    w = waiting("tool_call", "tool_call")
    assert due_at_ms(w, POLICY) == 31_000
    assert not is_due(w, POLICY, 30_999)
    assert is_due(w, POLICY, 31_000)


@pytest.mark.parametrize("boundary", ["prompt", "summarize", "end"])
def test_a_request_boundary_after_calls_flushes_them_at_once(boundary: str) -> None:
    assert is_due(waiting("tool_call", boundary), POLICY, 1_000)


@pytest.mark.parametrize("closing", ["summarize", "end"])
def test_a_summary_request_or_an_end_is_due_at_once_anywhere(closing: str) -> None:
    assert is_due(waiting(closing), POLICY, 1_000)
    assert is_due(waiting(closing, "tool_call"), POLICY, 1_000)


def test_a_new_request_waits_for_its_own_calls_the_wait_counted_from_the_first_call() -> None:
    w = waiting("prompt", "tool_call", start_ms=1_000)
    assert due_at_ms(w, POLICY) == 1_100 + 30_000
    assert is_due(waiting("prompt"), POLICY, 1_000)  # no call: nothing to wait for


def test_a_full_batch_by_count_or_by_characters_is_due_at_once() -> None:
    assert is_due(waiting(*["tool_call"] * 8), POLICY, 1_000)
    assert not is_due(waiting(*["tool_call"] * 7), POLICY, 1_000)
    assert is_due(waiting("tool_call", "tool_call", size=30_000), POLICY, 1_000)


def test_nothing_waiting_is_never_held_back() -> None:
    assert is_due(Waiting(kinds=[], sizes=[], published_ms=[]), POLICY, 0)


@given(
    kinds=st.lists(st.sampled_from(["tool_call", "prompt", "summarize", "end"]), max_size=12),
    size=st.integers(0, 70_000),
    start=st.integers(0, 10**12),
)
def test_a_turn_is_never_due_later_than_its_oldest_call_s_longest_wait(
    kinds: list[str], size: int, start: int
) -> None:
    if not kinds:
        return
    w = waiting(*kinds, size=size, start_ms=start)
    due = due_at_ms(w, POLICY)
    assert start <= due <= start + 100 * len(kinds) + POLICY.max_wait_ms
