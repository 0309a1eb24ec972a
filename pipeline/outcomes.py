"""Job outcomes (DESIGN's table) and the pure rules that pick one."""

from __future__ import annotations

import enum

import msgspec


class Outcome(enum.StrEnum):
    """What happened to one turn's stream entries."""

    STORED = "stored"
    SKIPPED = "skipped"
    PAUSED = "paused"
    DROPPED = "dropped"
    RETRY = "retry"
    DEAD = "dead"
    THROTTLED = "throttled"
    """Held back by the fleet-wide rate limit before any call: deferred, not a failed attempt."""
    RECORDED = "recorded"
    """Bookkeeping only (a prompt or an end with no tool calls): nothing for the observer."""


COUNTED = (
    "stored",
    "deduplicated",
    "skipped",
    "paused",
    "dropped",
    "retry",
    "dead",
    "throttled",
)


class TurnResult(msgspec.Struct, frozen=True, kw_only=True):
    """One turn's outcome; `stop` means the job must stop and come back after `defer_s`."""

    outcome: Outcome
    category: str | None = None
    stored: int = 0
    deduplicated: int = 0
    reason: str | None = None
    defer_s: float = 0.0

    @property
    def stop(self) -> bool:
        """Paused, retried and throttled turns keep their entries unacked: the job stops here."""
        return self.outcome in (Outcome.PAUSED, Outcome.RETRY, Outcome.THROTTLED)

    @property
    def label(self) -> str:
        """`dropped:prose`, `stored`, … as logs and metrics show it."""
        return f"{self.outcome}:{self.category}" if self.category else str(self.outcome)


def dropped_category(classification: str, parse_reason: str | None) -> str:
    """The category of a reply that is neither stored, skipped nor paused."""
    if classification == "xml":
        return "malformed_xml" if parse_reason is None else f"xml_{parse_reason}"
    return classification
