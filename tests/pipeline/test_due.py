"""When pending events make a turn due: a full batch, a request boundary, or a long wait."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.due import BatchPolicy, Waiting, due_at_ms, is_due

POLICY = BatchPolicy(max_events=8, max_chars=60_000, max_wait_ms=30_000)


def waiting(*kinds: str, size: int = 3_000, oldest_ms: int = 1_000) -> Waiting:
    return Waiting(kinds=kinds, sizes=[size] * len(kinds), oldest_ms=oldest_ms)


def test_a_few_tool_calls_wait_for_more_until_the_oldest_has_waited_long_enough() -> None:
    w = waiting("tool_call", "tool_call")
    assert due_at_ms(w, POLICY) == 31_000
    assert not is_due(w, POLICY, 30_999)
    assert is_due(w, POLICY, 31_000)


@pytest.mark.parametrize("boundary", ["prompt", "summarize", "end"])
def test_a_request_boundary_flushes_at_once(boundary: str) -> None:
    assert is_due(waiting("tool_call", boundary), POLICY, 1_000)
    assert is_due(waiting(boundary), POLICY, 1_000)


def test_a_full_batch_by_count_or_by_characters_is_due_at_once() -> None:
    assert is_due(waiting(*["tool_call"] * 8), POLICY, 1_000)
    assert not is_due(waiting(*["tool_call"] * 7), POLICY, 1_000)
    assert is_due(waiting("tool_call", "tool_call", size=30_000), POLICY, 1_000)


def test_nothing_waiting_is_never_held_back() -> None:
    assert is_due(Waiting(kinds=[], sizes=[], oldest_ms=5), POLICY, 5)


@given(
    kinds=st.lists(st.sampled_from(["tool_call", "prompt", "summarize", "end"]), max_size=12),
    size=st.integers(0, 70_000),
    oldest=st.integers(0, 10**12),
)
def test_a_turn_is_never_due_later_than_the_longest_wait(kinds: list[str], size: int,
                                                        oldest: int) -> None:  # fmt: skip
    due = due_at_ms(Waiting(kinds=kinds, sizes=[size] * len(kinds), oldest_ms=oldest), POLICY)
    assert oldest <= due <= oldest + POLICY.max_wait_ms
