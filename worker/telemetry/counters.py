"""Fleet-wide outcome and token counters in Redis, read back by `memq stats`."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from worker.keys import Keys
from worker.outcomes import COUNTED

if TYPE_CHECKING:
    from worker.telemetry.metrics import Metrics


class Counters:
    """HINCRBY-backed counters shared by every worker of a tenant (and this process' metrics)."""

    def __init__(self, redis: Redis, keys: Keys, metrics: Metrics | None = None) -> None:
        self.redis = redis
        self.keys = keys
        self.metrics = metrics

    async def count(self, outcome: str, n: int = 1, category: str | None = None) -> None:
        """Add n to an outcome (and to `outcome:category` when a category is given)."""
        if n <= 0:
            return
        pipe = self.redis.pipeline(transaction=False)
        self.queue_count(pipe, outcome, n, category)
        await pipe.execute()

    def queue_count(
        self, pipe: Pipeline, outcome: str, n: int = 1, category: str | None = None
    ) -> None:
        """`count` as part of a pipeline the caller runs (metrics count at once)."""
        if n <= 0:
            return
        pipe.hincrby(self.keys.outcomes, outcome, n)
        if category:
            pipe.hincrby(self.keys.outcomes, f"{outcome}:{category}", n)
        if self.metrics is not None:
            self.metrics.count_outcome(outcome, n, category)

    async def add_tokens(self, input_tokens: int, cached_input_tokens: int, output: int) -> None:
        """Add one call's token usage."""
        pipe = self.redis.pipeline(transaction=False)
        self.queue_tokens(pipe, input_tokens, cached_input_tokens, output)
        await pipe.execute()

    def queue_tokens(
        self, pipe: Pipeline, input_tokens: int, cached_input_tokens: int, output: int
    ) -> None:
        """`add_tokens` as part of a pipeline the caller runs."""
        pipe.hincrby(self.keys.tokens, "input", input_tokens)
        pipe.hincrby(self.keys.tokens, "cached_input", cached_input_tokens)
        pipe.hincrby(self.keys.tokens, "output", output)
        if self.metrics is not None:
            self.metrics.add_tokens(input_tokens, cached_input_tokens, output)

    async def outcomes(self) -> dict[str, int]:
        """Every counted outcome (zeros included) plus the per-category counts."""
        raw = await cast(Awaitable[dict[bytes, bytes]], self.redis.hgetall(self.keys.outcomes))
        got = {k.decode(): int(v) for k, v in raw.items()}
        return {**dict.fromkeys(COUNTED, 0), **got}

    async def tokens(self) -> dict[str, int]:
        """Token totals: input, cached_input, output."""
        raw = await cast(Awaitable[dict[bytes, bytes]], self.redis.hgetall(self.keys.tokens))
        got = {k.decode(): int(v) for k, v in raw.items()}
        return {"input": 0, "cached_input": 0, "output": 0, **got}
