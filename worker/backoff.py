"""One backoff rule for every retry loop: doubling from a base, capped, optionally jittered."""

from __future__ import annotations

import random
from collections.abc import Callable

import msgspec

MAX_RETRY_AFTER_S = 6 * 3600
"""The longest server retry-after honoured (the same bound as a quota pause)."""


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
        """Seconds to wait after failed attempt `attempt` (1 = the first).

        `max_s` caps our own backoff only: retrying before a server's retry-after just earns
        another 429, so that wait is honoured up to MAX_RETRY_AFTER_S.
        """
        delay = min(self.max_s, self.base_s * 2.0 ** min(max(0, attempt - 1), 60))
        if self.jitter:
            delay *= 0.5 + 0.5 * rand()
        if retry_after_s is not None:
            return max(delay, min(retry_after_s, MAX_RETRY_AFTER_S))
        return delay
