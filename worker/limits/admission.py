"""The gate before every observer call (daily budgets, then fleet-wide rate limits) and after it."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from datetime import UTC, datetime

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from pipeline.outcomes import TurnResult
from pipeline.turns.decide import RefusalKind, Refused, decide
from worker.keys import Keys
from worker.limits.budget import Budget, BudgetExceededError
from worker.limits.pauses import ProviderPausedError
from worker.limits.rate_limit import RateLimiter, ThrottledError
from worker.observers.protocol import Usage
from worker.settings import Settings
from worker.telemetry.counters import Counters

logger = logging.getLogger(__name__)

SHORT_WAIT_S = 1.0
"""A rate-limit wait shorter than this is slept in the turn; a longer one defers the job."""
_MAX_IN_TURN_WAIT_S = 3.0  # many short waits in a row (a saturated fleet) also defer the job

CallRefusedError = BudgetExceededError | ThrottledError | ProviderPausedError
CALL_REFUSALS = (BudgetExceededError, ThrottledError, ProviderPausedError)
"""What `admit` raises instead of letting a call go; `refused` turns each into an outcome."""


class CallGate:
    """Admits or refuses each observer call of this worker, and accounts for its tokens."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        settings: Settings,
        *,
        provider: str,
        model: str,
        counters: Counters,
    ) -> None:
        self.budget = Budget(
            redis,
            keys,
            per_day=settings.budget_tokens_per_day,
            per_project=settings.budget_tokens_per_day_per_project,
            recheck_s=settings.budget_recheck_s,
        )
        self.limiter = RateLimiter(
            redis,
            keys,
            provider,
            model,
            rpm=settings.rate_limit_rpm,
            tpm=settings.rate_limit_tpm,
        )
        self.counters = counters
        self.policy = settings.decision_policy

    async def admit(self, project: str, deadline: float) -> None:
        """Return when the call may go; raise one of CALL_REFUSALS if not."""
        await self.budget.check(project)
        waited = 0.0
        while (wait_s := await self.limiter.acquire()) > 0:
            if (
                wait_s >= SHORT_WAIT_S
                or waited + wait_s > _MAX_IN_TURN_WAIT_S
                or time.monotonic() + wait_s >= deadline
            ):
                raise ThrottledError(
                    f"{self.limiter.provider} observer: fleet rate limit or short pause, "
                    f"next call in {wait_s:.2f} s",
                    wait_s,
                )
            await asyncio.sleep(wait_s)
            waited += wait_s

    async def charge_limits(self, usage: Usage) -> None:
        """Charge one answered call's tokens to the rate limits only (budgets come later)."""
        await self.limiter.charge(usage.input_tokens + usage.output_tokens)

    def queue_budget(self, pipe: Pipeline, project: str, usage: Usage) -> None:
        """Add one answered call's tokens to the day's budgets, as part of a pipeline."""
        self.budget.queue_add(pipe, project, usage.input_tokens + usage.output_tokens)

    async def pause_shortly(self, seconds: float, reason: str) -> None:
        """Honour a provider's retry-after for the whole fleet (capped: see MAX_SHORT_PAUSE_S)."""
        await self.limiter.pause_shortly(seconds, reason)

    async def refused(self, error: CallRefusedError) -> TurnResult:
        """Carry out `decide`'s decision on a refused call: count and log it; the turn's
        entries stay pending and the job is deferred."""
        decision = decide(refusal(error), self.policy, now=datetime.now(UTC),
                          jitter=random.random())  # fmt: skip
        if decision.counted:
            await self.counters.count(decision.result, decision.counted)
        if isinstance(error, BudgetExceededError):
            logger.warning("%s", error)
        elif isinstance(error, ThrottledError):
            logger.info("%s", error, extra={"wait_s": error.wait_s})
        return decision.result


def refusal(error: CallRefusedError) -> Refused:
    """What a refusal from `admit` is, for the decision table."""
    if isinstance(error, ProviderPausedError):
        return Refused(kind=RefusalKind.PROVIDER_PAUSED, reason=str(error),
                       wait_s=error.remaining_s)  # fmt: skip
    if isinstance(error, BudgetExceededError):
        return Refused(kind=RefusalKind.BUDGET, reason=str(error), wait_s=error.retry_s)
    return Refused(kind=RefusalKind.THROTTLED, reason=str(error), wait_s=error.wait_s)
