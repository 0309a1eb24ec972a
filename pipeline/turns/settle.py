"""Settling a turn: the observer's reply becomes rows, an outcome and the next conversation.

Pure: no I/O and no clock (the time is passed in), so every rule of DESIGN's outcome table
that depends on the reply alone is decided here and tested without a worker.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from pipeline.events import Prompt
from pipeline.outcomes import TurnResult
from pipeline.prompting.conversation import (
    Exchange,
    ObserverState,
    bounded_digest,
    bounded_history,
)
from pipeline.prompting.truncate import truncate_observation_field
from pipeline.records import (
    DroppedOutput,
    ObservationRow,
    PromptRow,
    SummaryRow,
    TokenUsage,
    TurnRows,
)
from pipeline.replies.classify import classify_observer_output, quota_reset_hint
from pipeline.replies.parser import ParseResult
from pipeline.replies.textnorm import one_line_plain
from pipeline.turns.batching import TurnPlan
from pipeline.turns.caps import CAPPED_CATEGORY, TurnCaps, cap_observations
from pipeline.turns.decide import (
    TOO_LARGE_CATEGORY,
    Bookkeeping,
    Decision,
    Entries,
    Policy,
    Replied,
    ReplyTooLarge,
    decide,
)
from pipeline.turns.turn_records import observation_rows, summary_row

__all__ = ["TOO_LARGE_CATEGORY"]  # dead letters name a too-large reply by it

DROPPED_RAW_CHARS = 16_000
_NO_JITTER = 0.0  # what a turn gets for its reply, its size or its bookkeeping draws no jitter
_LINE_CHARS = 120


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """The observer's last reply in a turn, with the message it answered and what it cost."""

    user: str
    text: str
    parsed: ParseResult
    model: str
    provider: str
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # what the provider says the call cost, if it does


class HistoryLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How much of the conversation is sent again with each turn."""

    turns: int
    chars: int


class Settled(msgspec.Struct, frozen=True, kw_only=True):
    """A settled turn: `decide`'s decision, its rows and the conversation after it.

    A decision that keeps the entries (a PAUSED reply) writes nothing and keeps the
    conversation.
    """

    decision: Decision
    rows: TurnRows
    state: ObserverState

    @property
    def result(self) -> TurnResult:
        """The turn's result as counted and logged."""
        return self.decision.result


def prompt_rows(session: str, plan: TurnPlan, state: ObserverState) -> list[PromptRow]:
    """The user requests a turn carries, as rows, each numbered as the conversation counts it.

    `state` is the conversation with the turn's requests in it: its number is the last one's.
    A request published without a number (every agent's hook sends none) takes the number
    before the next one's.
    """
    numbers: list[int] = []
    following = state.prompt_number
    for p in reversed(plan.prompts):
        number = p.prompt_number or max(1, following)
        numbers.append(number)
        following = number - 1
    return [
        PromptRow(
            memory_session_id=session,
            project=p.project,
            prompt_number=number,
            prompt_text=p.prompt_text,
            created_at=p.occurred_at,
            event_id=p.event_id,
        )
        for p, number in zip(plan.prompts, reversed(numbers), strict=True)
    ]


def record(
    session: str, plan: TurnPlan, state: ObserverState, *, policy: Policy, now: datetime
) -> Settled:
    """A bookkeeping turn (prompts, an end): no observer call, its requests stored."""
    rows = TurnRows(prompts=prompt_rows(session, plan, state))
    decision = decide(Bookkeeping(), policy, now=now, jitter=_NO_JITTER)
    return Settled(decision=decision, rows=rows, state=state)


def settle(
    session: str,
    plan: TurnPlan,
    state: ObserverState,
    answer: Answer,
    *,
    told: Prompt | None,
    history: HistoryLimits,
    now: datetime,
    policy: Policy,
    caps: TurnCaps | None = None,
) -> Settled:
    """Settle a turn from the observer's answer, as `decide` rules: stored, skipped, dropped
    or paused.

    `state` is the conversation the answer continues; `told` the new request the turn's
    message showed the observer (if any); `caps` what the turn may store (None: no cap).
    """
    parsed = answer.parsed
    stores_observations = parsed.kind == "observations" and plan.kind == "observe"
    kept = list(parsed.observations) if stores_observations else []
    cut: str | None = None
    if stores_observations and caps is not None:
        capped = cap_observations(kept, caps)
        kept, cut = capped.observations, capped.reason
    replied = Replied(
        turn_kind="summarize" if plan.kind == "summarize" else "observe",
        valid=parsed.valid,
        parse_kind=parsed.kind,
        classification=classify_observer_output(answer.text),
        parse_reason=parsed.reason,
        capped=cut,
        reset_at=_reset_at(answer.text),
    )
    decision = decide(replied, policy, now=now, jitter=_NO_JITTER)
    if decision.entries is not Entries.ACK:  # a pause: nothing written, the conversation kept
        return Settled(decision=decision, rows=TurnRows(), state=state)
    created_at = plan.events[0].occurred_at
    event_ids = [e.event_id for e in plan.events]
    prompt_number = state.prompt_number or None
    observations: list[ObservationRow] = []
    summaries: list[SummaryRow] = []
    dropped: list[DroppedOutput] = []
    if stores_observations:
        observations = observation_rows(
            kept,
            plan.tool_calls,
            session=session,
            project=state.project,
            prompt_number=prompt_number,
            created_at=created_at,
            model=answer.model,
            event_ids=event_ids,
        )
    elif parsed.kind == "summary" and parsed.summary is not None:
        summary = summary_row(
            parsed.summary,
            session=session,
            project=state.project,
            prompt_number=prompt_number,
            created_at=created_at,
            model=answer.model,
        )
        summaries = [summary]
    if decision.category is not None:
        # A dropped reply, or a capped one that was stored: a dropped-reply row keeps its head
        # and what was wrong with it (or left out).
        category = decision.category
        reason = cut if category == CAPPED_CATEGORY else parsed.reason
        dropped = [_dropped(session, state.project, category, answer.text, event_ids, now,
                            reason, plan)]  # fmt: skip
    usage = TokenUsage(
        memory_session_id=session,
        project=state.project,
        provider=answer.provider,
        model=answer.model,
        input_tokens=answer.input_tokens,
        cached_input_tokens=answer.cached_input_tokens,
        output_tokens=answer.output_tokens,
        created_at=now,
        cost_usd=answer.cost_usd,
    )
    told_number = state.told_prompt_number
    if told is not None and told.prompt_number is not None:
        told_number = max(told_number, told.prompt_number)
    after = msgspec.structs.replace(
        state,
        history=bounded_history(
            [*state.history, Exchange(user=answer.user, assistant=answer.text)],
            history.turns,
            history.chars,
        ),
        told_prompt_number=told_number,
        digest=bounded_digest([*state.digest, *digest_lines(observations, summaries)]),
    )
    rows = TurnRows(
        prompts=prompt_rows(session, plan, state),
        observations=observations,
        summaries=summaries,
        dropped=dropped,
        usage=[usage],
    )
    return Settled(decision=decision, rows=rows, state=after)


def digest_lines(observations: list[ObservationRow], summaries: list[SummaryRow]) -> list[str]:
    """One line per stored row for the observer's digest: type and title."""
    lines = []
    for o in observations:
        label = o.title or o.subtitle or (o.narrative or "")[:_LINE_CHARS]
        lines.append(f"{o.type}: {one_line_plain(label)[:_LINE_CHARS]}")
    for s in summaries:
        lines.append(f"summary: {one_line_plain(s.request or s.completed or '')[:_LINE_CHARS]}")
    return lines


def _dropped(
    session: str, project: str, category: str, text: str, event_ids: list[str],
    now: datetime, reason: str | None, plan: TurnPlan,
) -> DroppedOutput:  # fmt: skip
    return DroppedOutput(
        memory_session_id=session,
        project=project,
        category=category,
        raw=truncate_observation_field(text, DROPPED_RAW_CHARS),
        event_ids=event_ids,
        created_at=now,
        reason=reason,
        turn_kind="summary" if plan.kind == "summarize" else "observation",
    )


def oversized(
    session: str, plan: TurnPlan, state: ObserverState, reason: str, head: str, *,
    policy: Policy, now: datetime,
) -> Settled:  # fmt: skip
    """A reply too large to read (`MEMQ_OBSERVER_MAX_REPLY_BYTES`): dropped, its head kept."""
    decision = decide(ReplyTooLarge(reason=reason), policy, now=now, jitter=_NO_JITTER)
    event_ids = [e.event_id for e in plan.events]
    category = decision.category or TOO_LARGE_CATEGORY
    row = _dropped(session, state.project, category, head, event_ids, now, reason, plan)
    rows = TurnRows(prompts=prompt_rows(session, plan, state), dropped=[row])
    return Settled(decision=decision, rows=rows, state=state)


def _reset_at(text: str) -> float | None:
    """A unix reset time in the quota prose (`…|1730000000`)."""
    hint = quota_reset_hint(text)
    if hint is not None and hint.strip().isdigit():
        return float(int(hint.strip()))
    return None
