"""Prometheus metrics of one worker process, on a registry of its own (never the global one)."""

from __future__ import annotations

import time

import msgspec
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from pipeline.outcomes import COUNTED, Outcome, TurnResult
from worker.connect.primary import primary_state
from worker.observers.protocol import Observer, ObserverReply, ObserverRequest
from worker.storage.outage import outages

PROVIDERS = ("anthropic", "openai")
TOKEN_KINDS = ("input", "cached_input", "output")


class FleetFigures(msgspec.Struct, frozen=True, kw_only=True):
    """The fleet-wide gauges, read from Redis and the store on each scrape."""

    stream_pending: int
    oldest_pending_s: float
    paused_providers: list[str]
    dead_letters: int
    vector_lag: int
    silent_sessions: int
    vector_oldest_pending_s: float = 0.0


# Each number of FleetFigures is one unlabelled gauge: (metric name, help).
_FLEET_GAUGES = {
    "stream_pending": (
        "memq_stream_pending",
        "Unprocessed events in every session stream (fleet-wide).",
    ),
    "oldest_pending_s": (
        "memq_stream_oldest_pending_seconds",
        "Age of the oldest unprocessed event (0 when none; fleet-wide).",
    ),
    "dead_letters": ("memq_dead_letters", "Entries in the dead-letter stream."),
    "vector_lag": ("memq_vector_lag", "Stored rows not yet in the vector index."),
    "vector_oldest_pending_s": (
        "memq_vector_oldest_pending_seconds",
        "Age of the oldest stored row not yet in the vector index (0 when none waits).",
    ),
    "silent_sessions": (
        "memq_silent_sessions",
        "Sessions whose tool calls went MEMQ_SILENT_ALERT_S without a stored observation.",
    ),
}


class Metrics:
    """Counters fed as outcomes happen; gauges set from FleetFigures before each scrape."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # The last commit's failure (None after a commit that worked): /readyz reads it.
        self.commit_failure: str | None = None
        r = self.registry
        self.outcomes = Counter(
            "memq_outcomes",
            "Outcomes as `memq stats` counts them: turns, or rows for stored/deduplicated.",
            ["outcome", "category"],
            registry=r,
        )
        self.events = Counter(
            "memq_events",
            "Events whose turn finished (any outcome but paused or retry).",
            registry=r,
        )
        self.dedupe_hits = Counter(
            "memq_dedupe_hits",
            "Observations not stored twice: their content hash existed.",
            registry=r,
        )
        self.batch_size = Histogram(
            "memq_batch_size",
            "Events per observer turn.",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.observer_latency = Histogram(
            "memq_observer_latency_seconds",
            "Duration of observer calls, failed ones included.",
            buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120),
            registry=r,
        )
        self.tokens = Counter(
            "memq_tokens", "Observer tokens as the API reported them.", ["kind"], registry=r
        )
        self.paused = Gauge(
            "memq_paused_providers",
            "1 while a provider is paused fleet-wide.",
            ["provider"],
            registry=r,
        )
        self.fleet = {
            field: Gauge(name, help_text, registry=r)
            for field, (name, help_text) in _FLEET_GAUGES.items()
        }
        self.recovered_announcements = Counter(
            "memq_recovered_announcements",
            "Rows announced late because their commit's announce never ran (a crash or a lost"
            " Redis): by a worker starting up, or by the session's next job.",
            ["by"],
            registry=r,
        )
        self.store_waits = Counter(
            "memq_store_waits",
            "Session jobs that stopped to wait for an unreachable store (no attempt counted).",
            registry=r,
        )
        self.store_reachable = Gauge(
            "memq_store_reachable",
            "0 while this process' database connections fail (an outage), else 1.",
            registry=r,
        )
        self.store_reachable.set_function(_store_reachable)
        # Series exist at 0 from the start, so rate() and absent-alerts work before traffic.
        for outcome in COUNTED:
            self.outcomes.labels(outcome, "")
        for kind in TOKEN_KINDS:
            self.tokens.labels(kind)
        for provider in PROVIDERS:
            self.paused.labels(provider)
        for by in ("startup", "session"):
            self.recovered_announcements.labels(by)
        self.redis_primary = Gauge(
            "memq_redis_primary",
            "1 for the Redis primary (host:port) this process reaches now.",
            ["address"],
            registry=r,
        )
        self.redis_failovers = Gauge(
            "memq_redis_failovers",
            "Sentinel failovers this process followed (the primary the sentinels name changed).",
            registry=r,
        )
        self.redis_failovers.set_function(lambda: float(primary_state().failovers))

    def count_outcome(self, outcome: str, n: int = 1, category: str | None = None) -> None:
        """Add n to an outcome; `deduplicated` rows are dedupe hits too."""
        self.outcomes.labels(outcome, category or "").inc(n)
        if outcome == "deduplicated":
            self.dedupe_hits.inc(n)

    def add_tokens(self, input_tokens: int, cached_input_tokens: int, output: int) -> None:
        """Add one call's token usage."""
        self.tokens.labels("input").inc(input_tokens)
        self.tokens.labels("cached_input").inc(cached_input_tokens)
        self.tokens.labels("output").inc(output)

    def finish_turn(self, result: TurnResult, events: int) -> None:
        """Count a turn's events once it finished; observer turns also give a batch size."""
        # A stopping turn leaves its events pending: they come back in a later turn.
        if result.stop or events <= 0:
            return
        self.events.inc(events)
        if result.outcome is not Outcome.RECORDED:  # prompts and ends only: no observer call
            self.batch_size.observe(events)

    def commit_done(self, failure: str | None) -> None:
        """Record how this process' last commit went: None when it worked, else why not."""
        self.commit_failure = failure

    def count_recovered(self, by: str, rows: int) -> None:
        """Rows announced late, by "startup" (a worker's backlog) or "session" (its next job)."""
        self.recovered_announcements.labels(by).inc(rows)

    def observe_call(self, seconds: float) -> None:
        """Record one observer call's duration."""
        self.observer_latency.observe(seconds)

    def set_fleet(self, figures: FleetFigures) -> None:
        """Set every fleet-wide gauge."""
        for field, gauge in self.fleet.items():
            gauge.set(getattr(figures, field))
        for provider in PROVIDERS:
            self.paused.labels(provider).set(1 if provider in figures.paused_providers else 0)

    def set_redis_primary(self, address: str) -> None:
        """Name the primary reached now (the old one's series goes: one series, at 1)."""
        self.redis_primary.clear()
        self.redis_primary.labels(address).set(1)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


def _store_reachable() -> float:
    return 0.0 if any(not r.reachable for r in outages()) else 1.0


class TimedObserver:
    """The wrapped Observer, with every call's duration recorded in the metrics."""

    def __init__(self, inner: Observer, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    @property
    def provider(self) -> str:
        """The wrapped observer's provider."""
        return self.inner.provider

    @property
    def model(self) -> str:
        """The wrapped observer's model."""
        return self.inner.model

    async def complete(self, request: ObserverRequest) -> ObserverReply:
        """Send one turn through the wrapped observer, timing it."""
        started = time.monotonic()
        try:
            return await self.inner.complete(request)
        finally:
            self.metrics.observe_call(time.monotonic() - started)

    async def aclose(self) -> None:
        """Close the wrapped observer."""
        await self.inner.aclose()
