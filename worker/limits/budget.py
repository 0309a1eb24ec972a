"""Daily token budgets: tokens counted in Redis per UTC day, checked before each observer call."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import cast

import msgspec
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from worker.errors import WorkerError
from worker.keys import Keys

_TOTAL = "total"
_PROJECT = "project:"
_DAY_TTL_S = 2 * 86_400  # yesterday's count stays readable for a day


class BudgetExceededError(WorkerError):
    """The day's token budget is spent: no observer call until `retry_s` has passed."""

    def __init__(self, message: str, retry_s: float) -> None:
        super().__init__(message)
        self.retry_s = retry_s


class BudgetState(msgspec.Struct, frozen=True, kw_only=True):
    """Today's token use against the budgets (`memq stats`); a limit of 0 means unlimited."""

    day: str
    used: int
    limit: int
    project_limit: int
    projects: dict[str, int]


def utc_day(now: datetime) -> str:
    """The UTC day a moment falls in, as `YYYY-MM-DD`."""
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def seconds_to_midnight(now: datetime) -> float:
    """Seconds until the next UTC midnight, when every budget starts over."""
    now = now.astimezone(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return (midnight - now).total_seconds()


class Budget:
    """The tenant's daily budgets: one Redis hash per UTC day (`total`, `project:<name>`)."""

    def __init__(
        self, redis: Redis, keys: Keys, *, per_day: int, per_project: int, recheck_s: float
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.per_day = per_day
        self.per_project = per_project
        self.recheck_s = recheck_s

    async def check(self, project: str, now: datetime | None = None) -> None:
        """Raise BudgetExceededError once the day's count has reached a budget."""
        if self.per_day <= 0 and self.per_project <= 0:
            return
        now = now or datetime.now(UTC)
        day = utc_day(now)
        raw = await cast(
            Awaitable[list[bytes | None]],
            self.redis.hmget(self.keys.budget(day), [_TOTAL, _PROJECT + project]),
        )
        total, in_project = (int(v or 0) for v in raw)
        retry_s = min(seconds_to_midnight(now), self.recheck_s)
        if 0 < self.per_day <= total:
            scope = f"MEMQ_BUDGET_TOKENS_PER_DAY={self.per_day}: {total} tokens used"
        elif 0 < self.per_project <= in_project:
            scope = (
                f"MEMQ_BUDGET_TOKENS_PER_DAY_PER_PROJECT={self.per_project}: "
                f"project {project} used {in_project} tokens"
            )
        else:
            return
        raise BudgetExceededError(
            f"token budget reached ({scope} on {day} UTC): observer calls wait for 00:00 UTC "
            f"or a raised budget, looking again in {retry_s:.0f} s",
            retry_s,
        )

    async def add(self, project: str, tokens: int, now: datetime | None = None) -> None:
        """Count one call's tokens (input + output) for the day and the project."""
        if tokens <= 0:
            return
        pipe = self.redis.pipeline(transaction=False)
        self.queue_add(pipe, project, tokens, now)
        await pipe.execute()

    def queue_add(
        self, pipe: Pipeline, project: str, tokens: int, now: datetime | None = None
    ) -> None:
        """`add` as part of a pipeline the caller runs."""
        if tokens <= 0:
            return
        key = self.keys.budget(utc_day(now or datetime.now(UTC)))
        pipe.hincrby(key, _TOTAL, tokens)
        pipe.hincrby(key, _PROJECT + project, tokens)
        pipe.expire(key, _DAY_TTL_S)

    async def state(self, now: datetime | None = None) -> BudgetState:
        """Today's use, overall and per project, with the limits."""
        day = utc_day(now or datetime.now(UTC))
        raw = await cast(Awaitable[dict[bytes, bytes]], self.redis.hgetall(self.keys.budget(day)))
        counts = {k.decode(): int(v) for k, v in raw.items()}
        projects = {
            k.removeprefix(_PROJECT): v for k, v in counts.items() if k.startswith(_PROJECT)
        }
        return BudgetState(
            day=day,
            used=counts.get(_TOTAL, 0),
            limit=self.per_day,
            project_limit=self.per_project,
            projects=dict(sorted(projects.items())),
        )
