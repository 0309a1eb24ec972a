"""One turn of a session: ask the observer, settle the reply (pipeline.turns.settle), commit."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

import msgspec
from redis.asyncio.client import Pipeline

from pipeline.outcomes import Outcome, TurnResult
from pipeline.prompting.conversation import (
    HISTORY_CHARS,
    Exchange,
    ObserverState,
    conversation_state,
    user_message,
)
from pipeline.replies.parser import parse_agent_xml
from pipeline.turns.batching import TurnPlan
from pipeline.turns.caps import CAPPED_CATEGORY, TurnCaps
from pipeline.turns.decide import Conversation, FailureKind
from pipeline.turns.own_tools import OWN_TOOL_REASON
from pipeline.turns.settle import Answer, HistoryLimits, Settled, oversized, record, settle
from worker.limits.admission import CALL_REFUSALS
from worker.observers.errors import (
    ObserverAuthError,
    ObserverError,
    ObserverQuotaError,
    ObserverReplyTooLargeError,
    ObserverTransientError,
)
from worker.observers.protocol import ObserverRequest, Usage
from worker.queue.leases import Lease
from worker.queue.streams import Entry, SessionStream
from worker.sessions.carry_out import Carrier
from worker.sessions.kept_replies import Kept, KeptReplies
from worker.sessions.runtime import Runtime
from worker.storage.protocol import StoreError, StoreUnavailableError
from worker.storage.records import BatchWrite

logger = logging.getLogger(__name__)


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
        # Answered calls' tokens owed to the day's budgets, paid by `_pay_budgets`: in the
        # commit's round trip, or on the way out of a turn that ends otherwise.
        self._owed: list[tuple[str, Usage]] = []
        self.kept = KeptReplies(rt.redis, rt.keys, session)
        self.carrier = Carrier(rt, session, lease, stream, self.kept.key)

    async def run(
        self, plan: TurnPlan, entries: list[Entry], deadline: float, *, read_ahead: int = 0,
        kept: Kept | None = None,
    ) -> TurnResult:  # fmt: skip
        """Run one turn; paused and retried turns leave their entries unacked.

        `read_ahead`: new entries the commit reads for the next turn in its round trip;
        `kept`: the turn settled before whose commit failed (committed, never asked again).
        """
        try:
            if kept is not None and kept.event_ids == [e.event_id for e in plan.events]:
                logger.info("committing the kept reply of a turn whose commit failed")
                result = await self._commit(plan, entries, kept.settled, read_ahead)
            else:
                result = await self._run(plan, entries, deadline, read_ahead)
            if plan.own_calls and not result.stop:
                await self._skip_own_calls(plan)
            return result
        finally:
            if self._owed:
                pipe = self.rt.redis.pipeline(transaction=False)
                self._pay_budgets(pipe)
                await pipe.execute()

    async def _skip_own_calls(self, plan: TurnPlan) -> None:
        """Count and log the calls to memq's own tools the turn consumed without showing them."""
        own = TurnResult(outcome=Outcome.SKIPPED, category="own-tool", reason=OWN_TOOL_REASON)
        await self.rt.counters.count(own, len(plan.own_calls))
        names = ", ".join(sorted({c.tool_name for c in plan.own_calls}))
        logger.info("skipped %d call(s) to memq's own tools (%s): %s",
                    len(plan.own_calls), names, OWN_TOOL_REASON)  # fmt: skip

    async def _run(
        self, plan: TurnPlan, entries: list[Entry], deadline: float, read_ahead: int
    ) -> TurnResult:
        state = await self._conversation(plan)
        if plan.kind == "record":
            recorded = record(self.session, plan, state, policy=self.rt.settings.decision_policy,
                              now=datetime.now(UTC))  # fmt: skip
            return await self._commit(plan, entries, recorded, read_ahead)
        s = self.rt.settings
        user, told = user_message(self.rt.mode, plan, state, s.field_budget_chars)
        try:
            asked, answer = await self._converse(plan, state, user, deadline)
        except CALL_REFUSALS as e:  # budgets, rate limits, a pause: the call never went
            return await self.rt.gate.refused(e)
        except ObserverReplyTooLargeError as e:  # paid for: dropped, never asked again
            logger.warning("dropped: %s", e)
            too_large = oversized(self.session, plan, state, str(e), e.head,
                                  policy=s.decision_policy, now=datetime.now(UTC))  # fmt: skip
            return await self._commit(plan, entries, too_large, read_ahead)
        except (ObserverError, TimeoutError) as e:
            return await self._failed(e, entries)
        limits = HistoryLimits(turns=s.history_turns, chars=HISTORY_CHARS)
        caps = TurnCaps(max_observations=s.max_observations_per_turn,
                        field_chars=s.field_budget_chars)  # fmt: skip
        now = datetime.now(UTC)
        settled = settle(self.session, plan, asked, answer, told=told, history=limits, now=now,
                         policy=s.decision_policy, caps=caps)  # fmt: skip
        if settled.result.category == CAPPED_CATEGORY:
            logger.warning("capped: %s", settled.result.reason)
        if settled.decision.stop:  # quota or login prose: nothing to commit
            await self.carrier.carry_out(settled.decision, entries)
            return settled.result
        return await self._commit(plan, entries, settled, read_ahead)

    async def _conversation(self, plan: TurnPlan) -> ObserverState:
        """The conversation this turn continues (a new one when the state was lost)."""
        stored = None
        if self.state is None and not plan.prompts:
            # A new conversation (the state was lost) and no request in the turn: storage has the
            # last one. Asked once per conversation: its first commit saves a state.
            stored = await self.rt.store.latest_prompt(self.session)
        return conversation_state(self.rt.mode, self.session, self.state, plan, stored)

    async def _converse(
        self, plan: TurnPlan, state: ObserverState, user: str, deadline: float
    ) -> tuple[ObserverState, Answer]:
        """Ask; a summary turn answered with observations is reminded once (the original lost
        such summaries). Returns the conversation the answer continues, and the answer."""
        answer = await self._ask(state, user, deadline)
        if plan.kind == "summarize" and answer.parsed.kind == "observations":
            exchange = Exchange(user=user, assistant=answer.text)
            state = msgspec.structs.replace(state, history=[*state.history, exchange])
            first = answer
            answer = await self._ask(state, self.rt.mode.prompts.summary_reminder, deadline)
            # The turn cost both calls: the usage rows (the cost view) say so, as the budget does.
            answer = msgspec.structs.replace(
                answer,
                input_tokens=answer.input_tokens + first.input_tokens,
                cached_input_tokens=answer.cached_input_tokens + first.cached_input_tokens,
                output_tokens=answer.output_tokens + first.output_tokens,
                cost_usd=None
                if answer.cost_usd is None and first.cost_usd is None
                else (answer.cost_usd or 0.0) + (first.cost_usd or 0.0),
            )
        return state, answer

    async def _ask(self, state: ObserverState, user: str, deadline: float) -> Answer:
        request = ObserverRequest(system=state.system, history=list(state.history), user=user)
        await self.rt.gate.admit(state.project, deadline)
        # The job must finish before arq's timeout cancels it mid-write.
        async with asyncio.timeout(max(1.0, deadline - time.monotonic())):
            reply = await self.rt.observer.complete(request)
        await self.rt.gate.charge_limits(reply.usage)
        self._owed.append((state.project, reply.usage))
        return Answer(
            user=user,
            text=reply.text,
            parsed=parse_agent_xml(reply.text, valid_types=self.rt.mode.type_ids),
            model=reply.model,
            provider=reply.provider,
            input_tokens=reply.usage.input_tokens,
            cached_input_tokens=reply.usage.cached_input_tokens,
            output_tokens=reply.usage.output_tokens,
            cost_usd=reply.usage.cost_usd,
        )

    async def _commit(
        self, plan: TurnPlan, entries: list[Entry], settled: Settled, read_ahead: int
    ) -> TurnResult:
        """Store (one transaction), announce, then ack and save the state: DESIGN's order."""
        rows = settled.rows
        # The batch is the turn's rows (a BatchWrite is a TurnRows) and whose turn they are.
        batch = BatchWrite(
            **msgspec.structs.asdict(rows),
            memory_session_id=self.session,
            project=settled.state.project,
            fence=self.lease.token,
            event_ids=[e.event_id for e in plan.events],
            ended=plan.ends,
        )
        try:
            written = await self.rt.store.write_batch(batch)
        except StoreUnavailableError:
            # PostgreSQL is not there: keep the paid reply and wait for it (the job stops),
            # counting no attempt, so an outage of any length dead-letters nothing.
            await self.kept.keep(entries[0].id, batch.event_ids, settled)
            raise
        except StoreError as e:  # a malformed database, a full disk: it answers, and fails
            # The reply is paid for: keep it for the retry, and count the attempt.
            reason = f"storage failed: {' '.join(str(e).split()) or type(e).__name__}"
            logger.warning("commit failed, the turn is kept for its retry: %s", reason)
            if self.rt.metrics is not None:
                self.rt.metrics.commit_done(reason)
            await self.kept.keep(entries[0].id, batch.event_ids, settled)
            return await self.failed(entries, FailureKind.STORAGE, reason)
        if self.rt.metrics is not None:
            self.rt.metrics.commit_done(None)
        self.state = settled.state
        result = settled.result
        if result.outcome is Outcome.STORED:
            result = msgspec.structs.replace(
                result, stored=len(written.stored), deduplicated=written.deduplicated
            )
        # The rest is one round trip: ack, state, attempts, announce, counters, budgets (and
        # the next batch). Fenced Lua steps refuse a stale lease holder. When it fails, the
        # next job finds the entries stored and flushes the outbox before acking them.
        pipe = self.rt.redis.pipeline(transaction=False)
        self.stream.queue_ack(pipe, self.lease.token, [e.id for e in entries])
        self.rt.states.queue_save(pipe, self.session, self.lease.token, settled.state)
        pipe.delete(self.rt.keys.attempts(self.session), self.kept.key)
        self.rt.outbox.queue(pipe, written.stored)
        self.rt.counters.queue_count(pipe, result)
        for u in rows.usage:
            self.rt.counters.queue_tokens(
                pipe, u.input_tokens, u.cached_input_tokens, u.output_tokens
            )
        self._pay_budgets(pipe)
        # A stopping worker leaves the rest unread for the next one.
        read_ahead = 0 if self.rt.stopping.is_set() else read_ahead
        if read_ahead:
            self.stream.queue_read_ahead(pipe, read_ahead)
        replies = await pipe.execute()
        if read_ahead:
            self.stream.keep_ahead(replies[-1])
        await self.rt.outbox.sent(written.stored)
        self.stream.check_ack(self.lease.token, replies[0])
        return result

    def _pay_budgets(self, pipe: Pipeline) -> None:
        """Add the tokens owed to the day's budgets to a pipeline the caller runs."""
        owed, self._owed = self._owed, []
        for project, usage in owed:
            self.rt.gate.queue_budget(pipe, project, usage)

    async def _failed(
        self, error: ObserverError | TimeoutError, entries: list[Entry]
    ) -> TurnResult:
        """A call that failed, as the decision table sees it: pause, retry, or dead."""
        if isinstance(error, ObserverQuotaError):
            return await self.failed(entries, FailureKind.QUOTA, str(error),
                                     reset_after_s=error.reset_after_s)  # fmt: skip
        if isinstance(error, ObserverAuthError):
            return await self.failed(entries, FailureKind.AUTH, str(error))
        kind = FailureKind.PERMANENT
        retry_after = None
        if isinstance(error, ObserverTransientError | TimeoutError):
            kind = FailureKind.TRANSIENT
            retry_after = getattr(error, "retry_after_s", None)
        return await self.failed(entries, kind, str(error) or type(error).__name__,
                                 retry_after_s=retry_after)  # fmt: skip

    async def failed(
        self, entries: list[Entry], kind: FailureKind, reason: str,
        *, retry_after_s: float | None = None, reset_after_s: float | None = None,
    ) -> TurnResult:  # fmt: skip
        """Carry out the decision on a failed attempt of the turn starting at `entries[0]`:
        pause, retry, or dead-letter its entries once MEMQ_MAX_ATTEMPTS is reached."""
        decision = await self.carrier.failed(kind, reason, entries, retry_after_s=retry_after_s,
                                             reset_after_s=reset_after_s)  # fmt: skip
        if decision.conversation is Conversation.RESET:
            self.state = None
        return decision.result
