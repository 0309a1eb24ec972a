"""Fleet figures for `memq stats` and the UI's operator panel: streams, outcomes, cost, …"""

from __future__ import annotations

import time

import msgspec
from redis.asyncio import Redis

from worker.keys import Keys
from worker.limits.budget import Budget, BudgetState
from worker.limits.pauses import Pauses
from worker.ops.cost import Cost, CostReader, prices_from
from worker.redis_text import as_text
from worker.settings import Settings
from worker.storage.protocol import Store
from worker.storage.records import StoreCounts
from worker.telemetry.counters import Counters


class StreamStats(msgspec.Struct, frozen=True, kw_only=True):
    """Unprocessed events across every session stream."""

    sessions: int
    pending: int
    oldest_pending_age_s: float | None


class Stats(msgspec.Struct, frozen=True, kw_only=True):
    """Everything `memq stats --json` prints."""

    streams: StreamStats
    outcomes: dict[str, int]
    paused_providers: list[str]
    dead_letters: int
    tokens: dict[str, int]
    vector_lag: int | None
    """Stored rows not yet in the vector index (pending vector-queue rows): grows while Chroma is
    down, drains to 0 once a worker reaches it (none are queued while MEMQ_CHROMA=off)."""
    store: StoreCounts
    budget: BudgetState | None = None
    """Today's tokens against MEMQ_BUDGET_TOKENS_PER_DAY(_PER_PROJECT); None without settings."""
    vector_index: str | None = None
    """MEMQ_CHROMA: `on`, `off` or the Chroma server's URL; None without settings."""
    cost: Cost | None = None
    """The observer's tokens (and spend, when prices are set) over the last days."""


async def stream_stats(redis: Redis, keys: Keys) -> StreamStats:
    """Sum the session streams: entries are deleted once acked, so XLEN is what is left."""
    sessions = pending = 0
    oldest_ms: int | None = None
    async for raw in redis.sscan_iter(keys.sessions, count=500):
        session = as_text(raw)
        sessions += 1
        n = await redis.xlen(keys.events(session))
        pending += n
        if n:
            first = await redis.xrange(keys.events(session), count=1)
            if first:
                entry_id = first[0][0]
                ms = int(as_text(entry_id).split("-")[0])
                oldest_ms = ms if oldest_ms is None else min(oldest_ms, ms)
    age = None if oldest_ms is None else round(max(0.0, time.time() - oldest_ms / 1000), 3)
    return StreamStats(sessions=sessions, pending=pending, oldest_pending_age_s=age)


async def collect_stats(
    redis: Redis,
    keys: Keys,
    store: Store,
    settings: Settings | None = None,
    *,
    cost: CostReader | None = None,
) -> Stats:
    """Read every figure once (the budget state only when the settings give its limits);
    the cost from `cost`, else with the settings' prices."""
    counters = Counters(redis, keys)
    budget = None
    if settings is not None:
        budget = await Budget(
            redis,
            keys,
            per_day=settings.budget_tokens_per_day,
            per_project=settings.budget_tokens_per_day_per_project,
            recheck_s=settings.budget_recheck_s,
        ).state()
    return Stats(
        streams=await stream_stats(redis, keys),
        outcomes=await counters.outcomes(),
        paused_providers=await Pauses(redis, keys).paused_providers(),
        dead_letters=await redis.xlen(keys.dead),
        tokens=await counters.tokens(),
        vector_lag=await store.vector_lag(),
        store=await store.counts(),
        budget=budget,
        vector_index=None if settings is None else settings.chroma,
        cost=await (cost or CostReader(store, prices_from(settings))).read(),
    )
