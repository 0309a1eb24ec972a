"""The names of what happens: a turn's outcome (docs/events.md's table), a job's result."""

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


class JobResult(enum.StrEnum):
    """How an `observe_session` job ended: the one word arq logs for it."""

    DRAINED = "drained"  # the stream has nothing more for now
    ENDED = "ended"  # the session ended and its stream is drained and gone
    YIELDED = "yielded"  # MEMQ_TURNS_PER_JOB used: the session goes to the back of the queue
    WAITING = "waiting"  # too little to be worth a call yet: back when it is due
    STOPPING = "stopping"  # the worker is shutting down: another one takes over
    BUSY = "busy"  # another job still holds the session's lease
    FENCED = "fenced"  # the lease was lost to a newer holder
    ERROR = "error"  # something failed (a Redis blip, a bug): retried later
    STORE_DOWN = "store-down"  # the store cannot be reached: back soon, no attempt counted
    PAUSED = "paused"  # a turn was paused (quota, budget): back after the pause
    RETRY = "retry"  # a turn failed and is retried after its backoff
    THROTTLED = "throttled"  # a turn was held back by the fleet's rate limits

    @classmethod
    def stopped_by(cls, outcome: Outcome) -> JobResult:
        """The result of a job stopped by a turn that keeps its entries."""
        return cls(str(outcome))


def dropped_category(classification: str, parse_reason: str | None) -> str:
    """The category of a reply that is neither stored, skipped nor paused."""
    if classification == "xml":
        return "malformed_xml" if parse_reason is None else f"xml_{parse_reason}"
    return classification
