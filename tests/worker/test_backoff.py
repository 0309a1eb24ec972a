"""The one backoff rule every retry loop uses."""

from __future__ import annotations

import pytest

from worker.backoff import MAX_RETRY_AFTER_S, Backoff

STEADY = Backoff(base_s=2.0, max_s=100.0, jitter=False)


@pytest.mark.parametrize(
    ("attempt", "full"), [(0, 2.0), (1, 2.0), (2, 4.0), (3, 8.0), (7, 100.0), (500, 100.0)]
)
def test_doubles_from_the_base_and_is_capped(attempt: int, full: float) -> None:
    assert STEADY.delay_s(attempt) == full


def test_equal_jitter_keeps_half_the_delay_and_randomises_the_rest() -> None:
    jittered = Backoff(base_s=2.0, max_s=100.0)
    assert jittered.delay_s(3, rand=lambda: 0.0) == 4.0
    assert jittered.delay_s(3, rand=lambda: 1.0) == 8.0


def test_a_longer_retry_after_wins_past_our_cap_but_within_its_own_bound() -> None:
    capped = Backoff(base_s=1.0, max_s=10.0, jitter=False)
    assert capped.delay_s(1, retry_after_s=30.0) == 30.0
    assert capped.delay_s(5, retry_after_s=0.5) == 10.0
    huge = Backoff(base_s=1.0, max_s=10.0).delay_s(1, retry_after_s=10 * MAX_RETRY_AFTER_S)
    assert huge == MAX_RETRY_AFTER_S


def test_the_settings_retry_policy_is_the_jittered_one_of_memq_retry_variables() -> None:
    from worker.settings import load_settings

    s = load_settings({"MEMQ_RETRY_BASE_S": "3", "MEMQ_RETRY_MAX_S": "40"})
    assert s.retry_backoff == Backoff(base_s=3.0, max_s=40.0, jitter=True)
