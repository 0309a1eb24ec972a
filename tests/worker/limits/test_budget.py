"""Daily token budgets against a real redis-server: counted per UTC day, checked before calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from worker.keys import Keys
from worker.limits.budget import Budget, BudgetExceededError, seconds_to_midnight, utc_day
from worker.ops.stats import collect_stats
from worker.settings import load_settings
from worker.storage.sqlite.store import SqliteStore

KEYS = Keys("bt")
NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _budget(
    redis: aioredis.Redis, per_day: int = 0, per_project: int = 0, recheck_s: float = 60
) -> Budget:
    return Budget(redis, KEYS, per_day=per_day, per_project=per_project, recheck_s=recheck_s)


# (per day, per project, tokens spent by alpha, tokens spent by beta, alpha refused?)
CASES = [
    pytest.param(0, 0, 10**9, 10**9, False, id="unlimited"),
    pytest.param(1000, 0, 999, 0, False, id="day-just-under"),
    pytest.param(1000, 0, 1000, 0, True, id="day-reached"),
    pytest.param(1000, 0, 400, 600, True, id="day-reached-by-all-projects"),
    pytest.param(0, 500, 499, 10_000, False, id="project-under-while-another-is-over"),
    pytest.param(0, 500, 500, 0, True, id="project-reached"),
    pytest.param(10_000, 500, 600, 0, True, id="project-reached-before-day"),
]


@pytest.mark.parametrize(("per_day", "per_project", "alpha", "beta", "refused"), CASES)
async def test_a_call_is_refused_once_a_days_count_reaches_a_budget(
    redis: aioredis.Redis, per_day: int, per_project: int, alpha: int, beta: int, refused: bool
) -> None:
    budget = _budget(redis, per_day, per_project)
    await budget.add("alpha", alpha, NOON)
    await budget.add("beta", beta, NOON)
    if refused:
        with pytest.raises(BudgetExceededError) as info:
            await budget.check("alpha", NOON)
        message = str(info.value)
        assert "token budget reached" in message
        assert "MEMQ_BUDGET_TOKENS_PER_DAY" in message
        assert "\n" not in message
    else:
        await budget.check("alpha", NOON)


@pytest.mark.parametrize(
    ("now", "recheck_s", "retry_s"),
    [
        (NOON, 60.0, 60.0),
        (datetime(2026, 11, 30, 23, 59, 30, tzinfo=UTC), 60.0, 30.0),
        (datetime(2026, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC), 60.0, 0.5),
        (NOON, 5.0, 5.0),
    ],
)
async def test_a_refused_call_looks_again_at_midnight_or_the_recheck_whichever_is_first(
    redis: aioredis.Redis, now: datetime, recheck_s: float, retry_s: float
) -> None:
    budget = _budget(redis, per_day=10, recheck_s=recheck_s)
    await budget.add("alpha", 10, now)
    with pytest.raises(BudgetExceededError) as info:
        await budget.check("alpha", now)
    assert info.value.retry_s == pytest.approx(retry_s)


async def test_the_count_starts_over_each_utc_day(redis: aioredis.Redis) -> None:
    budget = _budget(redis, per_day=100)
    late = datetime(2026, 11, 30, 23, 59, tzinfo=UTC)
    await budget.add("alpha", 100, late)
    with pytest.raises(BudgetExceededError):
        await budget.check("alpha", late)
    await budget.check("alpha", late + timedelta(minutes=2))  # 00:01 UTC the next day
    # A day's count is kept only as long as it matters.
    ttl = await redis.ttl(KEYS.budget("2026-11-30"))
    assert 86_400 < ttl <= 2 * 86_400


def test_utc_day_follows_utc_not_the_local_offset() -> None:
    tokyo = datetime(2026, 12, 1, 20, 0, tzinfo=UTC).astimezone(timezone(timedelta(hours=9)))
    assert tokyo.day == 2  # already tomorrow in Tokyo
    assert utc_day(tokyo) == "2026-12-01"
    assert seconds_to_midnight(tokyo) == 4 * 3600


async def test_state_shows_used_and_limits_per_day_and_per_project(redis: aioredis.Redis) -> None:
    budget = _budget(redis, per_day=5000, per_project=2000)
    await budget.add("beta", 300, NOON)
    await budget.add("alpha", 1200, NOON)
    await budget.add("alpha", 0, NOON)
    await budget.add("alpha", 100, NOON - timedelta(days=1))
    state = await budget.state(NOON)
    assert (state.day, state.used, state.limit, state.project_limit) == (
        "2026-11-30",
        1500,
        5000,
        2000,
    )
    assert state.projects == {"alpha": 1200, "beta": 300}


async def test_stats_show_todays_budget_state_when_given_the_settings(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    settings = load_settings({"MEMQ_PREFIX": "bt", "MEMQ_BUDGET_TOKENS_PER_DAY_PER_PROJECT": "700"})
    await _budget(redis).add("alpha", 650)
    store = SqliteStore(tmp_path / "memq.db")
    try:
        await store.migrate()
        with_budget = await collect_stats(redis, KEYS, store, settings)
        without = await collect_stats(redis, KEYS, store)
    finally:
        await store.aclose()
    assert with_budget.budget is not None
    assert (with_budget.budget.used, with_budget.budget.limit) == (650, 0)
    assert (with_budget.budget.project_limit, with_budget.budget.projects) == (700, {"alpha": 650})
    assert without.budget is None
