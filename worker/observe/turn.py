"""One turn of a session: prompt the observer, decide the outcome, store, ack, announce."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import cast

from pipeline.batching import Turn
from pipeline.classify import classify_observer_output, quota_reset_hint
from pipeline.events import Prompt
from pipeline.parser import ParseResult, parse_agent_xml
from pipeline.truncate import truncate_observation_field
from worker.limits.budget import BudgetExceededError
from worker.limits.pauses import ProviderPausedError
from worker.limits.rate_limit import ThrottledError
from worker.observe.conversation import conversation_state, user_message
from worker.observe.observer_state import ObserverState, bounded_history
from worker.observe.runtime import Runtime
from worker.observe.turn_records import observation_records, summary_record
from worker.observers.errors import (
    ObserverAuthError,
    ObserverError,
    ObserverQuotaError,
    ObserverTransientError,
)
from worker.observers.protocol import ObserverReply, ObserverRequest, Usage
from worker.observers.protocol import Turn as Exchange
from worker.outcomes import Outcome, TurnResult, backoff_s, dropped_category
from worker.queue.leases import Lease
from worker.queue.streams import Entry, SessionStream
from worker.storage.records import (
    BatchWrite,
    DroppedOutput,
    ObservationRecord,
    PromptRecord,
    SummaryRecord,
    TokenUsage,
)

logger = logging.getLogger(__name__)

DROPPED_RAW_CHARS = 16_000


class TurnRunner:
    """Runs the turns of one session for the holder of its lease."""

    def __init__(
        self,
        rt: Runtime,
        session: str,
        lease: Lease,
        stream: SessionStream,
        state: ObserverState | None,
    ) -> None:
        self.rt = rt
        self.session = session
        self.lease = lease
        self.stream = stream
        self.state = state
        # Usage of answered calls not yet added to the day's budgets: a commit adds it in
        # its pipeline, any other end of the turn right away.
        self._unbudgeted: list[tuple[str, Usage]] = []
        # Set by the job before a turn: new entries its commit reads ahead for the next turn
        # (0: none), saving the job a round trip per turn.
        self.read_ahead = 0

    async def run(self, turn: Turn, entries: list[Entry], deadline: float) -> TurnResult:
        """Run one turn; paused and retried turns leave their entries unacked."""
        try:
            return await self._run(turn, entries, deadline)
        finally:
            if self._unbudgeted:
                spent, self._unbudgeted = self._unbudgeted, []
                for project, usage in spent:
                    await self.rt.gate.account_budget(project, usage)

    async def _run(self, turn: Turn, entries: list[Entry], deadline: float) -> TurnResult:
        stored = None
        if self.state is None and not turn.prompts:
            # A new conversation (the state was lost) and no request in the turn: storage has the
            # last one. Asked once per conversation: its first commit saves a state.
            stored = await self.rt.store.latest_prompt(self.session)
        state = conversation_state(self.rt.mode, self.session, self.state, turn, stored)
        prompts = [self._prompt_record(p) for p in turn.prompts]
        if turn.kind == "record":
            result = TurnResult(outcome=Outcome.RECORDED)
            await self._commit(turn, entries, state, result, prompts=prompts)
            return result
        user, new_request = user_message(
            self.rt.mode, turn, state, self.rt.settings.field_budget_chars
        )
        try:
            reply = await self._ask(state, user, deadline)
            parsed = parse_agent_xml(reply.text, valid_types=self.rt.mode.type_ids)
            if turn.kind == "summarize" and parsed.kind == "observations":
                # The original lost such summaries; one reminder usually fixes it.
                state.history.append(Exchange(user=user, assistant=reply.text))
                user = self.rt.mode.prompts.summary_reminder
                reply = await self._ask(state, user, deadline)
                parsed = parse_agent_xml(reply.text, valid_types=self.rt.mode.type_ids)
        except (BudgetExceededError, ThrottledError) as e:
            return await self.rt.gate.refused(self.session, e)
        except ProviderPausedError as e:
            # Another worker paused the provider (and counted it): wait it out, keep the batch.
            return TurnResult(outcome=Outcome.PAUSED, reason=str(e), defer_s=e.remaining_s)
        except (ObserverQuotaError, ObserverAuthError) as e:
            reset = getattr(e, "reset_after_s", None)
            return await self._pause(str(e), reset)
        except (ObserverError, TimeoutError) as e:
            return await self._retry_or_dead(entries, e)
        return await self._settle(turn, entries, state, prompts, user, reply, parsed, new_request)

    async def _settle(
        self,
        turn: Turn,
        entries: list[Entry],
        state: ObserverState,
        prompts: list[PromptRecord],
        user: str,
        reply: ObserverReply,
        parsed: ParseResult,
        new_request: Prompt | None,
    ) -> TurnResult:
        category: str = classify_observer_output(reply.text)
        if not parsed.valid and category in ("quota", "auth"):
            return await self._pause(
                f"observer replied with {category} prose", self._reset_s(reply)
            )
        # The mode's skip guidance says "to skip, return an empty reply": that is a skip,
        # not a dropped reply (only a summary turn has its own <skip_summary/>).
        skipped = parsed.kind == "skip" or (category == "idle" and turn.kind == "observe")
        created_at = turn.events[0].occurred_at
        event_ids = [e.event_id for e in turn.events]
        prompt_number = state.prompt_number or None
        observations: list[ObservationRecord] = []
        summaries: list[SummaryRecord] = []
        dropped: list[DroppedOutput] = []
        if parsed.kind == "observations" and turn.kind == "observe":
            observations = observation_records(
                parsed.observations,
                turn.tool_calls,
                session=self.session,
                project=state.project,
                prompt_number=prompt_number,
                created_at=created_at,
                model=reply.model,
                event_ids=event_ids,
            )
        elif parsed.kind == "summary" and parsed.summary is not None:
            summaries = [
                summary_record(
                    parsed.summary,
                    session=self.session,
                    project=state.project,
                    prompt_number=prompt_number,
                    created_at=created_at,
                    model=reply.model,
                )
            ]
        elif not skipped:
            category = (
                "summary_as_observation"
                if parsed.valid
                else (dropped_category(category, parsed.reason))
            )
            dropped = [
                DroppedOutput(
                    memory_session_id=self.session,
                    project=state.project,
                    category=category,
                    raw=truncate_observation_field(reply.text, DROPPED_RAW_CHARS),
                    event_ids=event_ids,
                    created_at=datetime.now(UTC),
                    reason=parsed.reason,
                    turn_kind="summary" if turn.kind == "summarize" else "observation",
                )
            ]
        usage = TokenUsage(
            memory_session_id=self.session,
            project=state.project,
            provider=reply.provider,
            model=reply.model,
            input_tokens=reply.usage.input_tokens,
            cached_input_tokens=reply.usage.cached_input_tokens,
            output_tokens=reply.usage.output_tokens,
            created_at=datetime.now(UTC),
        )
        state.history = bounded_history(
            [*state.history, Exchange(user=user, assistant=reply.text)],
            self.rt.settings.history_turns,
            self.rt.settings.history_chars,
        )
        if new_request is not None and new_request.prompt_number is not None:
            state.told_prompt_number = max(state.told_prompt_number, new_request.prompt_number)
        if dropped:
            result = TurnResult(outcome=Outcome.DROPPED, category=category, reason=parsed.reason)
        elif skipped:
            result = TurnResult(outcome=Outcome.SKIPPED)
        else:
            result = TurnResult(outcome=Outcome.STORED)
        return await self._commit(
            turn,
            entries,
            state,
            result,
            prompts=prompts,
            observations=observations,
            summaries=summaries,
            dropped=dropped,
            usage=[usage],
        )

    async def _commit(
        self,
        turn: Turn,
        entries: list[Entry],
        state: ObserverState,
        result: TurnResult,
        prompts: list[PromptRecord],
        observations: list[ObservationRecord] | None = None,
        summaries: list[SummaryRecord] | None = None,
        dropped: list[DroppedOutput] | None = None,
        usage: list[TokenUsage] | None = None,
    ) -> TurnResult:
        """Store (one transaction), ack, save state, announce: the order DESIGN requires."""
        batch = BatchWrite(
            memory_session_id=self.session,
            project=state.project,
            fence=self.lease.token,
            event_ids=[e.event_id for e in turn.events],
            ended=turn.ends,
            prompts=prompts,
            observations=observations or [],
            summaries=summaries or [],
            dropped=dropped or [],
            usage=usage or [],
        )
        written = await self.rt.store.write_batch(batch)
        self.state = state
        if written.stored:
            # Before the ack: a crash in between leaves entries the next job finds stored,
            # and it flushes the outbox again before acking them.
            await self.rt.outbox.flush(self.session)
        # The rest goes to Redis in one round trip, in DESIGN's order: ack, state, attempts,
        # counters. Fenced Lua steps refuse a stale lease holder.
        pipe = self.rt.redis.pipeline(transaction=False)
        self.stream.queue_ack(pipe, self.lease.token, [e.id for e in entries])
        self.rt.states.queue_save(pipe, self.session, self.lease.token, state)
        pipe.delete(self.rt.keys.attempts(self.session))
        counters = self.rt.counters
        if result.outcome == Outcome.STORED:
            result = TurnResult(
                outcome=Outcome.STORED,
                stored=len(written.stored),
                deduplicated=written.deduplicated,
            )
            counters.queue_count(pipe, "stored", len(written.stored))
            counters.queue_count(pipe, "deduplicated", written.deduplicated)
        elif result.outcome != Outcome.RECORDED:
            counters.queue_count(pipe, str(result.outcome), 1, result.category)
        for u in batch.usage:
            counters.queue_tokens(pipe, u.input_tokens, u.cached_input_tokens, u.output_tokens)
        for project, spent in self._unbudgeted:
            self.rt.gate.queue_budget(pipe, project, spent)
        self._unbudgeted = []
        # A stopping worker leaves the rest unread for the next one.
        read_ahead = 0 if self.rt.stopping.is_set() else self.read_ahead
        if read_ahead:
            self.stream.queue_read_ahead(pipe, read_ahead)
        replies = await pipe.execute()
        if read_ahead:
            self.stream.keep_ahead(replies[-1])
        self.stream.check_ack(self.lease.token, replies[0])
        return result

    async def _ask(self, state: ObserverState, user: str, deadline: float) -> ObserverReply:
        request = ObserverRequest(system=state.system, history=list(state.history), user=user)
        await self.rt.gate.admit(state.project, deadline)
        # The job must finish before arq's timeout cancels it mid-write.
        async with asyncio.timeout(max(1.0, deadline - time.monotonic())):
            reply = await self.rt.observer.complete(request)
        await self.rt.gate.charge_limits(reply.usage)
        self._unbudgeted.append((state.project, reply.usage))
        return reply

    async def _pause(self, reason: str, reset_s: float | None) -> TurnResult:
        provider = self.rt.observer.provider
        seconds = await self.rt.pauses.pause(
            provider, reset_s or self.rt.settings.quota_pause_s, reason
        )
        await self.rt.counters.count("paused")
        logger.warning(
            "observer paused: %s",
            reason,
            extra={"session_id": self.session, "provider": provider, "pause_s": seconds},
        )
        return TurnResult(outcome=Outcome.PAUSED, reason=reason, defer_s=seconds)

    async def _retry_or_dead(self, entries: list[Entry], error: Exception) -> TurnResult:
        reason = str(error) or type(error).__name__
        key = self.rt.keys.attempts(self.session)
        # Attempts are per turn (its first entry), kept apart from the conversation, which
        # only a committed turn changes.
        attempts = int(await cast(Awaitable[int], self.rt.redis.hincrby(key, entries[0].id, 1)))
        await self.rt.redis.expire(key, 24 * 3600)
        if attempts >= self.rt.settings.max_attempts:
            await self.stream.dead_letter(
                self.lease.token, [(e, f"retries exhausted: {reason}") for e in entries]
            )
            await self.rt.counters.count("dead", len(entries))
            # A fresh observer conversation: whatever confused this one is gone.
            self.state = None
            await self.rt.redis.delete(self.rt.keys.observer(self.session), key)
            return TurnResult(outcome=Outcome.DEAD, reason=reason)
        await self.rt.counters.count("retry")
        retry_after = error.retry_after_s if isinstance(error, ObserverTransientError) else None
        if retry_after:  # the provider wants every caller to wait, not just this session
            await self.rt.gate.back_off(retry_after, reason)
        s = self.rt.settings
        delay = backoff_s(
            attempts, base_s=s.retry_base_s, max_s=s.retry_max_s, retry_after_s=retry_after
        )
        return TurnResult(outcome=Outcome.RETRY, reason=reason, defer_s=delay)

    def _prompt_record(self, prompt: Prompt) -> PromptRecord:
        return PromptRecord(
            memory_session_id=self.session,
            project=prompt.project,
            prompt_number=prompt.prompt_number or 0,
            prompt_text=prompt.prompt_text,
            created_at=prompt.occurred_at,
            event_id=prompt.event_id,
        )

    def _reset_s(self, reply: ObserverReply) -> float | None:
        """A unix reset time in the quota prose (`…|1730000000`), as seconds from now."""
        hint = quota_reset_hint(reply.text)
        if hint is not None and hint.strip().isdigit():
            return max(1.0, int(hint.strip()) - time.time())
        return None
