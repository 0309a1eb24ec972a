"""The backoff formula, pure: doubling from a base, capped, jittered by a number passed in.

`worker.backoff.Backoff` (every retry loop's policy) draws the random number; the turn
decision (`pipeline.turns.decide`) passes its own, so both wait by the same rule.
"""

from __future__ import annotations

MAX_RETRY_AFTER_S = 6 * 3600
"""The longest server retry-after honoured (the same bound as a quota pause)."""


def backoff_delay_s(
    base_s: float,
    max_s: float,
    attempt: int,
    *,
    jitter: float | None,
    retry_after_s: float | None = None,
) -> float:
    """Seconds to wait after failed attempt `attempt` (1 = the first).

    `jitter` in [0, 1) is "equal jitter" (half the delay fixed, half scaled by it; None: no
    jitter), which keeps a fleet from retrying in step. `max_s` caps our own backoff only:
    retrying before a server's retry-after just earns another 429, so that wait is honoured
    up to MAX_RETRY_AFTER_S.
    """
    delay = min(max_s, base_s * 2.0 ** min(max(0, attempt - 1), 60))
    if jitter is not None:
        delay *= 0.5 + 0.5 * jitter
    if retry_after_s is not None:
        return max(delay, min(retry_after_s, MAX_RETRY_AFTER_S))
    return delay
