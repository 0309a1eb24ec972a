"""Turn planning: how pending events become TurnPlans (observer turns), in publish order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from pipeline.events import End, Event, Prompt, Summarize, ToolCall
from pipeline.turns.own_tools import is_own_tool


class TurnPlan(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a session: an observer call (observe/summarize) or bookkeeping only.

    `events` are every event the turn consumes, in order (acked together once it is done):
    a `prompt` is carried by the turn that follows it; an `end` closes the session.
    """

    kind: Literal["observe", "summarize", "record"]
    events: tuple[Event, ...]
    own_calls: tuple[ToolCall, ...] = ()
    """Calls to memq's own tools among `events`: consumed with the turn, never shown."""

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls this turn shows the observer."""
        return tuple(e for e in self.events if isinstance(e, ToolCall) and e not in self.own_calls)

    @property
    def prompts(self) -> tuple[Prompt, ...]:
        """The user requests that arrived before this turn's tool calls or summary."""
        return tuple(e for e in self.events if isinstance(e, Prompt))

    @property
    def summarize(self) -> Summarize | None:
        """The summary request of a summarize turn."""
        return next((e for e in self.events if isinstance(e, Summarize)), None)

    @property
    def ends(self) -> bool:
        """Whether the session ended with this turn."""
        return any(isinstance(e, End) for e in self.events)


def plan_turns(
    events: Sequence[Event],
    *,
    max_tool_calls: int,
    max_chars: int,
    sizes: Sequence[int] | None = None,
    own_servers: Sequence[str] = (),
) -> list[TurnPlan]:
    """Group events into turns: consecutive tool calls share a turn up to the two limits.

    `sizes` are the events' encoded sizes (for the character budget); a single oversize
    call still gets a turn of its own. A `summarize` flushes the tool calls before it and
    is a turn of its own; an `end` flushes and closes; prompts ride with the next turn.
    A call to memq's own MCP tools (`own_servers`) rides with the next turn like a prompt,
    never shown to the observer. The turns hold every event once, in order: callers pair
    them with entries by position.
    """
    sizes = sizes if sizes is not None else [0] * len(events)
    turns: list[TurnPlan] = []
    carried: list[Event] = []  # prompts waiting for the next turn
    calls: list[Event] = []
    chars = 0

    def own(event: Event) -> bool:
        return isinstance(event, ToolCall) and is_own_tool(event.tool_name, own_servers)

    def turn(kind: Literal["observe", "summarize", "record"], events: list[Event]) -> TurnPlan:
        hidden = tuple(e for e in events if isinstance(e, ToolCall) and own(e))
        return TurnPlan(kind=kind, events=tuple(events), own_calls=hidden)

    def flush_calls() -> None:
        nonlocal calls, carried, chars
        if any(isinstance(e, ToolCall) and not own(e) for e in calls):
            turns.append(turn("observe", calls))
            calls, chars = [], 0

    for event, size in zip(events, sizes, strict=True):
        if own(event):
            carried.append(event)
        elif isinstance(event, ToolCall):
            n_calls = sum(isinstance(e, ToolCall) and not own(e) for e in calls)
            if n_calls and (n_calls >= max_tool_calls or chars + size > max_chars):
                flush_calls()
            calls.extend(carried)
            carried = []
            calls.append(event)
            chars += size
        elif isinstance(event, Prompt):
            flush_calls()
            carried.append(event)
        elif isinstance(event, Summarize):
            flush_calls()
            turns.append(turn("summarize", [*carried, event]))
            carried = []
        else:  # End
            flush_calls()
            turns.append(turn("record", [*carried, event]))
            carried = []
    flush_calls()
    if carried:
        turns.append(turn("record", carried))
    return turns
