"""One backoff rule for every retry loop: doubling from a base, capped, optionally jittered."""

from __future__ import annotations

import random
from collections.abc import Callable

import msgspec

from pipeline.backoff import MAX_RETRY_AFTER_S, backoff_delay_s

__all__ = ["MAX_RETRY_AFTER_S", "Backoff"]


class Backoff(msgspec.Struct, frozen=True, kw_only=True):
    """A retry loop's waits: `base_s` after the first failure, doubling, capped at `max_s`."""

    base_s: float
    max_s: float
    jitter: bool = True
    """"Equal jitter" (half fixed, half random) keeps a fleet from retrying in step."""

    def delay_s(
        self,
        attempt: int,
        *,
        retry_after_s: float | None = None,
        rand: Callable[[], float] = random.random,
    ) -> float:
        """Seconds to wait after failed attempt `attempt` (1 = the first); the formula is
        `pipeline.backoff.backoff_delay_s`, with `rand()` as its jitter."""
        return backoff_delay_s(
            self.base_s,
            self.max_s,
            attempt,
            jitter=rand() if self.jitter else None,
            retry_after_s=retry_after_s,
        )
