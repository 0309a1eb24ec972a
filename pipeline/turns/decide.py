"""The one decision table: what happened in a turn becomes what the worker does about it.

Every row of the outcome table in docs/events.md is a branch here, and
tests/pipeline/turns/test_decide.py walks that table against `decide`. Pure: the clock, the
attempt count and the jitter come in as arguments; `worker/` only carries a Decision out.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Literal

import msgspec

from pipeline.backoff import backoff_delay_s
from pipeline.outcomes import Outcome, TurnResult, dropped_category
from pipeline.replies.classify import OutputCategory
from pipeline.replies.parser import ParseKind
from pipeline.turns.caps import CAPPED_CATEGORY

MAX_PAUSE_S = 6 * 3600
"""The longest provider pause, whatever a reply or a header announces."""
TOO_LARGE_CATEGORY = "too_large"
SUMMARY_AS_OBSERVATION = "summary_as_observation"
BUDGET_CATEGORY = "budget"


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """The settings the table reads (MEMQ_QUOTA_PAUSE_S, MEMQ_MAX_ATTEMPTS, MEMQ_RETRY_*)."""

    quota_pause_s: float
    max_attempts: int
    retry_base_s: float
    retry_max_s: float
    retry_jitter: bool = True


class Replied(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The observer answered: what its reply parsed as, for a turn of `turn_kind`."""

    turn_kind: Literal["observe", "summarize"]
    valid: bool
    parse_kind: ParseKind
    """`parse_agent_xml`'s kind: observations, summary, skip or invalid."""
    classification: OutputCategory
    """`classify_observer_output`: idle, xml, quota, auth or prose."""
    parse_reason: str | None = None
    capped: str | None = None
    """What the turn's cap left out of a stored reply (None: nothing)."""
    reset_at: float | None = None
    """A unix time the quota prose names for its reset."""


class ReplyTooLarge(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The reply was over MEMQ_OBSERVER_MAX_REPLY_BYTES: paid for, never asked again."""

    reason: str


class Bookkeeping(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A turn with nothing for the observer (prompts, an end): its rows are recorded."""


class FailureKind(enum.StrEnum):
    """How an observer call (or the commit after it) failed."""

    TRANSIENT = "transient"  # timeout, connection error, 5xx, 429
    QUOTA = "quota"  # quota or billing error
    AUTH = "auth"  # a login or key the provider refuses
    PERMANENT = "permanent"  # any other refusal of the request
    STORAGE = "storage"  # the store failed: an attempt like any other


class Failed(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The call (or storage) failed; `attempts` is how many failed before this one."""

    kind: FailureKind
    reason: str
    attempts: int
    entries: int
    """How many stream entries the turn holds (a dead turn counts each)."""
    retry_after_s: float | None = None
    reset_after_s: float | None = None


class RefusalKind(enum.StrEnum):
    """Why the call never went."""

    PROVIDER_PAUSED = "provider_paused"  # another worker met the provider's quota
    BUDGET = "budget"  # the day's token budget is spent
    THROTTLED = "throttled"  # the fleet's rate limits, or a retry-after backoff


class Refused(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The limits or a pause held the call back for `wait_s`."""

    kind: RefusalKind
    reason: str
    wait_s: float


class Undecodable(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Stream entries that do not decode as events."""

    entries: int


Happened = Replied | ReplyTooLarge | Bookkeeping | Failed | Refused | Undecodable


class Entries(enum.StrEnum):
    """What becomes of the turn's stream entries."""

    ACK = "ack"  # commit the turn's rows, then ack
    KEEP = "keep"  # leave them pending: the job stops and comes back after `defer_s`
    DEAD_LETTER = "dead_letter"  # move them to the dead letters (which acks them)


class Conversation(enum.StrEnum):
    """What becomes of the session's observer conversation."""

    CONTINUES = "continues"  # the turn's exchange (if any) is added to it
    KEPT = "kept"  # as it was before the turn
    RESET = "reset"  # dropped: the next turn starts a fresh one


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What the worker does about a turn; each field is one thing to carry out."""

    outcome: Outcome
    entries: Entries
    category: str | None = None
    reason: str | None = None
    defer_s: float = 0.0
    pause_provider_s: float | None = None
    """Pause the provider fleet-wide (`<prefix>:pause:<provider>`) for this long."""
    short_pause_s: float | None = None
    """A short pause of the provider's calls fleet-wide (`<prefix>:backoff:<provider>`): a
    retry-after."""
    conversation: Conversation = Conversation.CONTINUES
    count_attempt: bool = False
    """Add one to the turn's failed attempts."""
    counted: int = 1
    """How many times the outcome is counted (0: another worker counted it)."""

    @property
    def stop(self) -> bool:
        """Kept entries stop the job: it comes back after `defer_s`."""
        return self.entries is Entries.KEEP

    @property
    def result(self) -> TurnResult:
        """The turn's result as counted, logged and measured."""
        return TurnResult(
            outcome=self.outcome, category=self.category, reason=self.reason, defer_s=self.defer_s
        )


def decide(happened: Happened, policy: Policy, *, now: datetime, jitter: float) -> Decision:
    """The decision for what happened in a turn (docs/events.md's outcome table).

    `now` is the clock for a reset time a reply names; `jitter` in [0, 1) spreads the
    retries and throttled turns of a fleet.
    """
    match happened:
        case Replied():
            return _replied(happened, policy, now)
        case ReplyTooLarge(reason=reason):
            # Never read: the conversation goes on as if the turn had not been asked.
            return Decision(outcome=Outcome.DROPPED, entries=Entries.ACK,
                            category=TOO_LARGE_CATEGORY, reason=reason,
                            conversation=Conversation.KEPT)  # fmt: skip
        case Bookkeeping():
            return Decision(outcome=Outcome.RECORDED, entries=Entries.ACK)
        case Failed():
            return _failed(happened, policy, jitter)
        case Refused():
            return _refused(happened, jitter)
        case Undecodable(entries=n):
            # The observer never saw them: its conversation goes on.
            return Decision(outcome=Outcome.DEAD, entries=Entries.DEAD_LETTER, counted=n)


def _replied(reply: Replied, policy: Policy, now: datetime) -> Decision:
    if not reply.valid and reply.classification in ("quota", "auth"):
        reset_s = None if reply.reset_at is None else max(1.0, reply.reset_at - now.timestamp())
        return _pause(f"observer replied with {reply.classification} prose", reset_s, policy)
    if reply.parse_kind == "observations" and reply.turn_kind == "observe":
        return _stored(reply.capped)
    if reply.parse_kind == "summary":
        return _stored(None)
    # The mode's skip guidance says "to skip, return an empty reply": that is a skip, not a
    # dropped reply (only a summary turn has its own <skip_summary/>).
    if reply.parse_kind == "skip" or (
        reply.classification == "idle" and reply.turn_kind == "observe"
    ):
        return Decision(outcome=Outcome.SKIPPED, entries=Entries.ACK)
    category = (
        SUMMARY_AS_OBSERVATION
        if reply.valid
        else dropped_category(reply.classification, reply.parse_reason)
    )
    return Decision(outcome=Outcome.DROPPED, entries=Entries.ACK, category=category,
                    reason=reply.parse_reason)  # fmt: skip


def _stored(capped: str | None) -> Decision:
    if capped is None:
        return Decision(outcome=Outcome.STORED, entries=Entries.ACK)
    # Stored, with a dropped-reply row that keeps the reply's head and what was left out.
    return Decision(outcome=Outcome.STORED, entries=Entries.ACK, category=CAPPED_CATEGORY,
                    reason=capped)  # fmt: skip


def _pause(reason: str, reset_s: float | None, policy: Policy) -> Decision:
    # No announced reset (or a zero one): the configured pause.
    seconds = max(1.0, min(MAX_PAUSE_S, reset_s or policy.quota_pause_s))
    return Decision(outcome=Outcome.PAUSED, entries=Entries.KEEP, reason=reason,
                    defer_s=seconds, pause_provider_s=seconds,
                    conversation=Conversation.KEPT)  # fmt: skip


def _failed(failure: Failed, policy: Policy, jitter: float) -> Decision:
    if failure.kind in (FailureKind.QUOTA, FailureKind.AUTH):
        return _pause(failure.reason, failure.reset_after_s, policy)
    attempts = failure.attempts + 1
    if attempts >= policy.max_attempts:
        # A fresh observer conversation: whatever confused this one is gone.
        return Decision(outcome=Outcome.DEAD, entries=Entries.DEAD_LETTER,
                        reason=failure.reason, conversation=Conversation.RESET,
                        counted=failure.entries)  # fmt: skip
    delay = backoff_delay_s(
        policy.retry_base_s,
        policy.retry_max_s,
        attempts,
        jitter=jitter if policy.retry_jitter else None,
        retry_after_s=failure.retry_after_s,
    )
    return Decision(
        outcome=Outcome.RETRY,
        entries=Entries.KEEP,
        reason=failure.reason,
        defer_s=delay,
        # The provider wants every caller to wait, not just this session.
        short_pause_s=failure.retry_after_s or None,
        count_attempt=True,
        conversation=Conversation.KEPT,
    )


def _refused(refusal: Refused, jitter: float) -> Decision:
    if refusal.kind is RefusalKind.PROVIDER_PAUSED:
        # Another worker paused the provider (and counted it): wait it out, keep the batch.
        return Decision(outcome=Outcome.PAUSED, entries=Entries.KEEP, reason=refusal.reason,
                        defer_s=refusal.wait_s, counted=0,
                        conversation=Conversation.KEPT)  # fmt: skip
    if refusal.kind is RefusalKind.BUDGET:
        return Decision(outcome=Outcome.PAUSED, entries=Entries.KEEP, category=BUDGET_CATEGORY,
                        reason=refusal.reason, defer_s=refusal.wait_s,
                        conversation=Conversation.KEPT)  # fmt: skip
    # Jitter: sessions throttled together should not all come back at the same instant.
    return Decision(outcome=Outcome.THROTTLED, entries=Entries.KEEP, reason=refusal.reason,
                    defer_s=refusal.wait_s * (1 + 0.25 * jitter),
                    conversation=Conversation.KEPT)  # fmt: skip
