"""The observer conversation: its state, which prompt each turn sends, the bounded history."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from pipeline.events import Prompt
from pipeline.prompting.modes import Mode
from pipeline.prompting.prompts import (
    SessionHeader,
    build_continuation_prompt,
    build_init_prompt,
    build_observation_prompt,
    build_summary_prompt,
)
from pipeline.records import StoredPrompt
from pipeline.turns.batching import TurnPlan

T = TypeVar("T")


class Exchange(msgspec.Struct, frozen=True, kw_only=True):
    """One earlier exchange with the observer: the user message and the reply it got."""

    user: str
    assistant: str


DIGEST_ITEMS = 30
DIGEST_CHARS = 3_000
# The character cap on raw exchanges re-sent with MEMQ_HISTORY_TURNS (oldest dropped first): a
# bound on the prompt when someone turns history on, not a figure anyone had reason to tune.
HISTORY_CHARS = 40_000
"""The digest of what the session stored, as sent with every turn: its newest lines within both."""


class ObserverState(msgspec.Struct, kw_only=True):
    """What the next turn needs: the system prompt, the digest, request, history.

    `digest` (one line per stored observation or summary, newest last) stands in for the
    earlier exchanges: re-sending those cost most of a live session's input. `history`
    (raw exchanges, MEMQ_HISTORY_TURNS) is empty unless configured.
    """

    system: str
    # Stored in Redis as `recorded` (its name before the digest was called a digest): states
    # saved by an older memq still load.
    digest: list[str] = msgspec.field(default_factory=list, name="recorded")
    history: list[Exchange] = []
    project: str = ""
    user_request: str = ""
    prompt_number: int = 0
    told_prompt_number: int = 0
    """The highest prompt number the observer has been shown."""


def bounded_digest(lines: list[str]) -> list[str]:
    """The newest digest lines within DIGEST_ITEMS and DIGEST_CHARS."""
    return _newest_within(lines, DIGEST_ITEMS, DIGEST_CHARS, len)


def bounded_history(history: list[Exchange], max_turns: int, max_chars: int) -> list[Exchange]:
    """Keep the newest exchanges within both limits; the oldest are dropped first."""
    return _newest_within(history, max_turns, max_chars, _exchange_chars)


def _exchange_chars(exchange: Exchange) -> int:
    return len(exchange.user) + len(exchange.assistant)


def _newest_within(
    items: list[T], max_items: int, max_chars: int, size: Callable[[T], int]
) -> list[T]:
    """The newest `max_items` items (none when it is not positive), then the oldest dropped
    until their total `size` is at most `max_chars`."""
    kept = items[-max_items:] if max_items > 0 else []
    total = sum(size(item) for item in kept)
    while kept and total > max_chars:
        total -= size(kept[0])
        kept = kept[1:]
    return kept


def conversation_state(
    mode: Mode,
    session: str,
    state: ObserverState | None,
    plan: TurnPlan,
    stored: StoredPrompt | None = None,
) -> ObserverState:
    """The conversation to continue, or a new one: the init prompt when the turn opens the
    session with its first request, else the continuation prompt (the state was lost).

    `stored` is the session's last stored request, the one a lost state held when the turn
    carries none. The state passed in is never changed.
    """
    first = plan.events[0]
    prompts = later = plan.prompts
    if state is not None:
        # A copy: the turn may still fail, and only a committed turn changes the conversation.
        state = msgspec.structs.replace(state, history=list(state.history), project=first.project)
    else:
        opening = prompts[0] if prompts else None
        fresh = opening is not None and opening.prompt_number in (None, 0, 1)
        build = build_init_prompt if fresh else build_continuation_prompt
        request, number, requested_at = "", 0, first.occurred_at
        if opening is not None:
            request, number = opening.prompt_text, opening.prompt_number or 1
            later = prompts[1:]  # counted here already: an unnumbered one must not become 2
        elif stored is not None:
            request, number = stored.prompt_text, stored.prompt_number
            requested_at = stored.created_at
        system = build(
            mode,
            SessionHeader(
                project=first.project,
                memory_session_id=session,
                user_prompt=request,
                prompt_number=number,
                requested_at=requested_at,
            ),
        )
        # The system prompt tells the observer of the request: no notice of it as new.
        state = ObserverState(
            system=system,
            project=first.project,
            user_request=request,
            prompt_number=number,
            told_prompt_number=number,
        )
    for p in later:
        state.user_request = p.prompt_text
        state.prompt_number = p.prompt_number or state.prompt_number + 1
    return state


def user_message(
    mode: Mode, plan: TurnPlan, state: ObserverState, field_budget_chars: int
) -> tuple[str, Prompt | None]:
    """This turn's user message, and the new request it tells the observer about (if any)."""
    new_request = _untold_request(plan, state)
    summarize = plan.summarize
    if plan.kind == "summarize" and summarize is not None:
        message = build_summary_prompt(
            mode,
            last_assistant_message=summarize.last_assistant_message,
            user_prompt=state.user_request or None,
            prompt_number=state.prompt_number or None,
            digest=state.digest,
        )
        return message, new_request
    message = build_observation_prompt(
        plan.tool_calls,
        mode=mode,
        field_budget_chars=field_budget_chars,
        new_request=new_request,
        digest=state.digest,
    )
    return message, new_request


def _untold_request(plan: TurnPlan, state: ObserverState) -> Prompt | None:
    """The request the observer has not been shown yet, if any.

    Usually the turn carries it; but a prompt that reached the worker before any of its tool
    calls was committed alone (a bookkeeping turn), so it is rebuilt from the state.
    """
    if state.prompt_number <= state.told_prompt_number:
        return None
    if plan.prompts:
        return msgspec.structs.replace(plan.prompts[-1], prompt_number=state.prompt_number)
    first = plan.events[0]
    return Prompt(
        event_id=first.event_id,
        memory_session_id=first.memory_session_id,
        project=first.project,
        occurred_at=first.occurred_at,
        prompt_text=state.user_request,
        prompt_number=state.prompt_number,
    )
