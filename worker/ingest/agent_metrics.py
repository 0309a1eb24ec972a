"""Prometheus metrics of one `memq agent`, on a registry of its own: where its events went.

An operator of an agent host sees from them whether hooks reach Redis or wait in the spool,
and why: Redis unreachable, too few replicas confirming (MEMQ_PUBLISH_WAIT_REPLICAS), a
session over its backlog, or the publisher's queue full.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from worker.ingest.spool import SpoolStatus

# Why events went to the spool instead of Redis: the `reason` label.
SPOOL_REASONS = (
    "redis_unavailable",  # Redis (or the sentinels) did not answer in time
    "not_replicated",  # Redis took them, but WAIT saw too few replicas: not published
    "backpressure",  # a session's backlog was full (MEMQ_MAX_PENDING_PER_SESSION)
    "queue_full",  # more hook requests waited to publish than the queue holds
    "behind_spool",  # older events waited in the spool: these go after them, in order
    "durable",  # the hook asked for its events on disk before its answer (?durable=1)
    "stopping",  # the agent was stopping
    "publish_failed",  # a wrong URL or credentials, or an error memq did not expect (logged)
)


class AgentMetrics:
    """The agent's counters and gauges; `render` is what `/metrics` answers."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.published = Counter(
            "memq_agent_published_events",
            "Events this agent published to Redis itself (duplicates Redis had seen excluded)",
            registry=self.registry,
        )
        self.spooled = Counter(
            "memq_agent_spooled_events",
            "Events this agent put in its spool instead of Redis, by why",
            ["reason"],
            registry=self.registry,
        )
        self.flushed = Counter(
            "memq_agent_flushed_events",
            "Spooled events this agent sent to Redis later (those Redis already held included);"
            " a flush cut off midway counts only once it runs again",
            registry=self.registry,
        )
        self.dropped = Counter(
            "memq_agent_dropped_events",
            "Events the spool had no room for (its cap): lost, also in `memq spool status`",
            registry=self.registry,
        )
        self.spool_events = Gauge(
            "memq_agent_spool_events",
            "Events waiting in this host's spool now",
            registry=self.registry,
        )
        self.stalled = Gauge(
            "memq_agent_stalled",
            "1 while the publisher makes no progress (MEMQ_AGENT_STALL_S): /healthz says 503",
            registry=self.registry,
        )
        for reason in SPOOL_REASONS:
            self.spooled.labels(reason)  # every reason shows, at 0 until it happens

    def watch(self, spool_status: Callable[[], SpoolStatus], stalled: Callable[[], bool]) -> None:
        """Read the spool's size and the stall on each scrape."""
        self.spool_events.set_function(lambda: float(spool_status().events))
        self.stalled.set_function(lambda: 1.0 if stalled() else 0.0)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
