"""Fleet-wide outcome and token counters in Redis, read back by `memq stats`."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from pipeline.outcomes import COUNTED, Outcome, TurnResult
from worker.keys import Keys

if TYPE_CHECKING:
    from worker.telemetry.metrics import Metrics


class Counters:
    """HINCRBY-backed counters shared by every worker of a tenant (and this process' metrics)."""

    def __init__(self, redis: Redis, keys: Keys, metrics: Metrics | None = None) -> None:
        self.redis = redis
        self.keys = keys
        self.metrics = metrics

    async def count(self, result: TurnResult, n: int = 1) -> None:
        """Count a finished turn (see `queue_count`)."""
        pipe = self.redis.pipeline(transaction=False)
        self.queue_count(pipe, result, n)
        await pipe.execute()

    def queue_count(self, pipe: Pipeline, result: TurnResult, n: int = 1) -> None:
        """Count a finished turn in a pipeline the caller runs (metrics count at once): its
        stored and deduplicated rows, or its outcome n times (dead: once per entry)."""
        if result.outcome is Outcome.STORED:
            self._queue(pipe, "stored", result.stored)
            self._queue(pipe, "deduplicated", result.deduplicated)
            if result.category:  # `stored:capped`: some of the reply was cut or left out
                pipe.hincrby(self.keys.outcomes, f"stored:{result.category}", 1)
        elif result.outcome is not Outcome.RECORDED:
            self._queue(pipe, str(result.outcome), n, result.category)

    def _queue(self, pipe: Pipeline, name: str, n: int, category: str | None = None) -> None:
        if n <= 0:
            return
        pipe.hincrby(self.keys.outcomes, name, n)
        if category:
            pipe.hincrby(self.keys.outcomes, f"{name}:{category}", n)
        if self.metrics is not None:
            self.metrics.count_outcome(name, n, category)

    def queue_tokens(
        self, pipe: Pipeline, input_tokens: int, cached_input_tokens: int, output: int
    ) -> None:
        """Add one call's token usage, in a pipeline the caller runs."""
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
