"""Settling a turn: the observer's reply becomes rows, an outcome and the next conversation.

Pure: no I/O and no clock (the time is passed in), so every rule of DESIGN's outcome table
that depends on the reply alone is decided here and tested without a worker.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from pipeline.events import Prompt
from pipeline.outcomes import Outcome, TurnResult, dropped_category
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
from pipeline.turns.turn_records import observation_rows, summary_row

DROPPED_RAW_CHARS = 16_000
TOO_LARGE_CATEGORY = "too_large"
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
    """A settled turn: its outcome, its rows and the conversation after it.

    A PAUSED result writes nothing and keeps the conversation; `pause_s` is the provider's
    announced reset (None: the configured pause).
    """

    result: TurnResult
    rows: TurnRows
    state: ObserverState
    pause_s: float | None = None


def prompt_rows(session: str, plan: TurnPlan) -> list[PromptRow]:
    """The user requests a turn carries, as rows."""
    return [
        PromptRow(
            memory_session_id=session,
            project=p.project,
            prompt_number=p.prompt_number or 0,
            prompt_text=p.prompt_text,
            created_at=p.occurred_at,
            event_id=p.event_id,
        )
        for p in plan.prompts
    ]


def record(session: str, plan: TurnPlan, state: ObserverState) -> Settled:
    """A bookkeeping turn (prompts, an end): no observer call, its requests stored."""
    rows = TurnRows(prompts=prompt_rows(session, plan))
    return Settled(result=TurnResult(outcome=Outcome.RECORDED), rows=rows, state=state)


def settle(
    session: str,
    plan: TurnPlan,
    state: ObserverState,
    answer: Answer,
    *,
    told: Prompt | None,
    history: HistoryLimits,
    now: datetime,
    caps: TurnCaps | None = None,
) -> Settled:
    """Decide a turn from the observer's answer: stored, skipped, dropped or paused.

    `state` is the conversation the answer continues; `told` the new request the turn's
    message showed the observer (if any); `caps` what the turn may store (None: no cap).
    """
    parsed = answer.parsed
    category: str = classify_observer_output(answer.text)
    if not parsed.valid and category in ("quota", "auth"):
        reason = f"observer replied with {category} prose"
        return Settled(
            result=TurnResult(outcome=Outcome.PAUSED, reason=reason),
            rows=TurnRows(),
            state=state,
            pause_s=_reset_s(answer.text, now),
        )
    # The mode's skip guidance says "to skip, return an empty reply": that is a skip,
    # not a dropped reply (only a summary turn has its own <skip_summary/>).
    skipped = parsed.kind == "skip" or (category == "idle" and plan.kind == "observe")
    created_at = plan.events[0].occurred_at
    event_ids = [e.event_id for e in plan.events]
    prompt_number = state.prompt_number or None
    observations: list[ObservationRow] = []
    summaries: list[SummaryRow] = []
    dropped: list[DroppedOutput] = []
    cut: str | None = None
    if parsed.kind == "observations" and plan.kind == "observe":
        kept = list(parsed.observations)
        if caps is not None:
            capped = cap_observations(kept, caps)
            kept, cut = capped.observations, capped.reason
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
    elif not skipped:
        category = (
            "summary_as_observation" if parsed.valid else dropped_category(category, parsed.reason)
        )
        dropped = [
            _dropped(session, state.project, category, answer.text, event_ids, now,
                     parsed.reason, plan)
        ]  # fmt: skip
    if dropped:
        result = TurnResult(outcome=Outcome.DROPPED, category=category, reason=parsed.reason)
    elif skipped:
        result = TurnResult(outcome=Outcome.SKIPPED)
    elif cut is not None:
        # Stored, with a dropped-reply row that keeps the reply's head and what was left out.
        dropped = [_dropped(session, state.project, CAPPED_CATEGORY, answer.text, event_ids,
                            now, cut, plan)]  # fmt: skip
        result = TurnResult(outcome=Outcome.STORED, category=CAPPED_CATEGORY, reason=cut)
    else:
        result = TurnResult(outcome=Outcome.STORED)
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
        prompts=prompt_rows(session, plan),
        observations=observations,
        summaries=summaries,
        dropped=dropped,
        usage=[usage],
    )
    return Settled(result=result, rows=rows, state=after)


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
    session: str, plan: TurnPlan, state: ObserverState, reason: str, head: str, now: datetime
) -> Settled:
    """A reply too large to read (`MEMQ_OBSERVER_MAX_REPLY_BYTES`): dropped, its head kept."""
    event_ids = [e.event_id for e in plan.events]
    row = _dropped(session, state.project, TOO_LARGE_CATEGORY, head, event_ids, now, reason, plan)
    rows = TurnRows(prompts=prompt_rows(session, plan), dropped=[row])
    result = TurnResult(outcome=Outcome.DROPPED, category=TOO_LARGE_CATEGORY, reason=reason)
    return Settled(result=result, rows=rows, state=state)


def _reset_s(text: str, now: datetime) -> float | None:
    """A unix reset time in the quota prose (`…|1730000000`), as seconds from `now`."""
    hint = quota_reset_hint(text)
    if hint is not None and hint.strip().isdigit():
        return max(1.0, int(hint.strip()) - now.timestamp())
    return None
