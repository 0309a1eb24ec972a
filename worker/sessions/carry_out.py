"""Carrying out a turn's decision when it is not a commit: pause, retry, dead-letter, reset.

What to do is `pipeline.turns.decide`'s; this module only does it, in the turn runner's old
order: the attempt counted first (a crash after it still counts it), the entries dead-lettered
before the outcome is counted, the conversation reset once they are gone, the fleet-wide
short pause last.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import cast

from pipeline.turns.decide import Conversation, Decision, Entries, Failed, FailureKind, decide
from worker.queue.leases import Lease
from worker.queue.streams import Entry, SessionStream
from worker.sessions.runtime import Runtime

logger = logging.getLogger(__name__)

ATTEMPTS_TTL_S = 24 * 3600


class Carrier:
    """Carries out the decisions of one session's turns for the holder of its lease."""

    def __init__(
        self, rt: Runtime, session: str, lease: Lease, stream: SessionStream, kept_key: str
    ) -> None:
        self.rt = rt
        self.session = session
        self.lease = lease
        self.stream = stream
        self.kept_key = kept_key

    async def failed(
        self,
        kind: FailureKind,
        reason: str,
        entries: list[Entry],
        *,
        retry_after_s: float | None = None,
        reset_after_s: float | None = None,
    ) -> Decision:
        """Decide and carry out a failed call (or commit) of the turn starting at `entries[0]`."""
        # Attempts are per turn (its first entry), kept apart from the conversation, which
        # only a committed turn changes.
        raw = await cast(
            Awaitable[bytes | str | None],
            self.rt.redis.hget(self.rt.keys.attempts(self.session), entries[0].id),
        )
        failure = Failed(kind=kind, reason=reason, attempts=int(raw or 0), entries=len(entries),
                         retry_after_s=retry_after_s, reset_after_s=reset_after_s)  # fmt: skip
        decision = decide(failure, self.rt.settings.decision_policy, now=datetime.now(UTC),
                          jitter=random.random())  # fmt: skip
        await self.carry_out(decision, entries)
        return decision

    async def carry_out(self, decision: Decision, entries: list[Entry]) -> None:
        """Do what a decision that commits nothing says, for the turn holding `entries`."""
        attempts = self.rt.keys.attempts(self.session)
        if decision.count_attempt:
            pipe = self.rt.redis.pipeline(transaction=False)
            pipe.hincrby(attempts, entries[0].id, 1)
            pipe.expire(attempts, ATTEMPTS_TTL_S)
            await pipe.execute()
        reason = decision.reason or str(decision.outcome)
        if decision.pause_provider_s is not None:
            provider = self.rt.observer.provider
            await self.rt.pauses.pause(provider, decision.pause_provider_s, reason)
        if decision.entries is Entries.DEAD_LETTER:
            await self.stream.dead_letter(
                self.lease.token, [(e, f"retries exhausted: {reason}") for e in entries]
            )
        if decision.counted:
            await self.rt.counters.count(decision.result, decision.counted)
        if decision.pause_provider_s is not None:
            logger.warning(
                "observer paused: %s",
                reason,
                extra={"provider": self.rt.observer.provider, "pause_s": decision.defer_s},
            )
        if decision.conversation is Conversation.RESET:
            # A fresh observer conversation, and the dead turn's attempts and kept reply gone.
            await self.rt.redis.delete(self.rt.keys.observer(self.session), attempts, self.kept_key)
        if decision.short_pause_s:
            await self.rt.gate.pause_shortly(decision.short_pause_s, reason)
