"""Fleet figures for `memq stats` and the UI's operator panel: streams, outcomes, cost, …"""

from __future__ import annotations

import time

import msgspec
from redis.asyncio import Redis

from worker.connect.primary import connected_primary
from worker.keys import Keys
from worker.limits.budget import Budget, BudgetState
from worker.limits.pauses import Pauses
from worker.ops.cost import Cost, CostReader, prices_from
from worker.redis_text import as_text
from worker.settings import Settings
from worker.storage.protocol import Store, StoreError
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
    store: StoreCounts | None
    """None while the store is unreachable (`store_error` says why)."""
    vector_oldest_pending_s: float | None = None
    """How long the oldest row waiting for the vector index has been stored (None when none
    waits): the index's lag in time. After `memq reindex` it is the oldest re-queued row's."""
    store_error: str | None = None
    """Why the store's figures are missing: the store does not answer (an outage)."""
    budget: BudgetState | None = None
    """Today's tokens against MEMQ_BUDGET_TOKENS_PER_DAY(_PER_PROJECT); None without settings."""
    vector_index: str | None = None
    """MEMQ_CHROMA: `on`, `off` or the Chroma server's URL; None without settings."""
    cost: Cost | None = None
    """The observer's tokens (and spend, when prices are set) over the last days."""
    redis_primary: str | None = None
    """host:port of the Redis primary these figures were read from (after a Sentinel
    failover, the promoted replica's)."""


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
    stored = await _store_figures(store, cost or CostReader(store, prices_from(settings)))
    return Stats(
        streams=await stream_stats(redis, keys),
        outcomes=await counters.outcomes(),
        paused_providers=await Pauses(redis, keys).paused_providers(),
        dead_letters=await redis.xlen(keys.dead),
        tokens=await counters.tokens(),
        vector_lag=stored.vector_lag,
        store=stored.counts,
        vector_oldest_pending_s=stored.vector_oldest_pending_s,
        store_error=stored.error,
        budget=budget,
        vector_index=None if settings is None else settings.chroma,
        cost=stored.cost,
        redis_primary=connected_primary(redis),
    )


class _StoreFigures(msgspec.Struct, frozen=True, kw_only=True):
    counts: StoreCounts | None = None
    vector_lag: int | None = None
    vector_oldest_pending_s: float | None = None
    cost: Cost | None = None
    error: str | None = None


async def _store_figures(store: Store, cost: CostReader) -> _StoreFigures:
    """The figures the store holds; during an outage none, and why (Redis's still show)."""
    try:
        oldest_ms = await store.vector_oldest_pending_ms()
        return _StoreFigures(
            counts=await store.counts(),
            vector_lag=await store.vector_lag(),
            vector_oldest_pending_s=_age_s(oldest_ms),
            cost=await cost.read(),
        )
    except StoreError as e:
        return _StoreFigures(error=str(e))


def _age_s(epoch_ms: int | None) -> float | None:
    return None if epoch_ms is None else round(max(0.0, time.time() - epoch_ms / 1000), 3)
