"""The Runtime: every client a job needs, built once at worker startup and passed down."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis

from pipeline.prompting.modes import Mode
from worker.errors import WorkerError
from worker.keys import Keys
from worker.limits.admission import CallGate
from worker.limits.pauses import Pauses
from worker.observers.protocol import Observer
from worker.queue.scheduling import Scheduler
from worker.sessions.observer_state import StateStore
from worker.sessions.outbox import Outbox
from worker.settings import Settings
from worker.storage.protocol import Store
from worker.telemetry.counters import Counters

if TYPE_CHECKING:
    from worker.telemetry.metrics import Metrics


@dataclass(frozen=True, slots=True)
class Runtime:
    """Built in startup(), closed in shutdown(); jobs receive it through arq's ctx."""

    settings: Settings
    keys: Keys
    redis: Redis
    store: Store
    observer: Observer
    mode: Mode
    scheduler: Scheduler
    states: StateStore
    pauses: Pauses
    counters: Counters
    consumer: str
    """This worker's consumer name in the session streams' group."""
    gate: CallGate
    """Budgets and fleet-wide rate limits, checked before every observer call."""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set on SIGTERM/SIGINT: jobs finish the turn in hand, start no new one, and hand off."""
    metrics: Metrics | None = None
    """This process' Prometheus metrics (`memq worker --metrics-port`), fed by `counters`."""

    @property
    def outbox(self) -> Outbox:
        """The way this runtime's stored rows get announced (built per use: tests swap `store`)."""
        return Outbox(self.redis, self.keys, self.store, self.settings.feed_maxlen, self.metrics)

    @property
    def lease_ttl_ms(self) -> int:
        """Lease TTL: short, renewed while the job runs, so a dead worker frees it quickly."""
        return 10_000

    @classmethod
    def build(
        cls,
        *,
        settings: Settings,
        redis: Redis,
        store: Store,
        observer: Observer,
        mode: Mode,
        consumer: str,
        metrics: Metrics | None = None,
    ) -> Runtime:
        """Wire the small per-tenant helpers around the clients."""
        keys = Keys(settings.prefix)
        counters = Counters(redis, keys, metrics)
        gate = CallGate(
            redis,
            keys,
            settings,
            provider=observer.provider,
            model=observer.model,
            counters=counters,
        )
        return cls(
            settings=settings,
            keys=keys,
            redis=redis,
            store=store,
            observer=observer,
            mode=mode,
            scheduler=Scheduler(redis, keys),
            states=StateStore(redis, keys),
            pauses=Pauses(redis, keys),
            counters=counters,
            consumer=consumer,
            gate=gate,
            metrics=metrics,
        )


def runtime_from(ctx: dict[str, Any]) -> Runtime:
    """The Runtime arq's ctx carries; fails loudly when startup() did not run."""
    rt = ctx.get("runtime")
    if not isinstance(rt, Runtime):
        raise WorkerError("worker ctx has no Runtime: startup() did not run")
    return rt
