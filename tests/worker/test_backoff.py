"""The one backoff rule every retry loop uses."""

from __future__ import annotations

import pytest

from worker.backoff import MAX_RETRY_AFTER_S, backoff_s


@pytest.mark.parametrize(
    ("attempt", "full"), [(0, 2.0), (1, 2.0), (2, 4.0), (3, 8.0), (7, 100.0), (500, 100.0)]
)
def test_doubles_from_the_base_and_is_capped(attempt: int, full: float) -> None:
    assert backoff_s(attempt, base_s=2.0, max_s=100.0, jitter=False) == full


def test_equal_jitter_keeps_half_the_delay_and_randomises_the_rest() -> None:
    assert backoff_s(3, base_s=2.0, max_s=100.0, rand=lambda: 0.0) == 4.0
    assert backoff_s(3, base_s=2.0, max_s=100.0, rand=lambda: 1.0) == 8.0


def test_a_longer_retry_after_wins_past_our_cap_but_within_its_own_bound() -> None:
    assert backoff_s(1, base_s=1.0, max_s=10.0, jitter=False, retry_after_s=30.0) == 30.0
    assert backoff_s(5, base_s=1.0, max_s=10.0, jitter=False, retry_after_s=0.5) == 10.0
    huge = backoff_s(1, base_s=1.0, max_s=10.0, retry_after_s=10 * MAX_RETRY_AFTER_S)
    assert huge == MAX_RETRY_AFTER_S
