"""plan_turns: how a session's pending events become observer turns, in publish order."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.events import End, Event, Prompt, Summarize, ToolCall
from pipeline.turns.batching import TurnPlan, plan_turns

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _event(code: str, n: int) -> Event:
    common = {"event_id": f"{code}{n}", "memory_session_id": "s", "project": "p", "occurred_at": T0}
    if code == "t":
        return ToolCall(tool_name="Bash", tool_input={"n": n}, **common)
    if code == "p":
        return Prompt(prompt_text=f"request {n}", prompt_number=n, **common)
    if code == "s":
        return Summarize(**common)
    return End(**common)


def _events(codes: str) -> list[Event]:
    return [_event(c, i) for i, c in enumerate(codes)]


def _shape(turns: list[TurnPlan]) -> list[str]:
    """Each turn as kind:codes, e.g. observe:ptt."""
    return [f"{t.kind}:{''.join(e.event_id[0] for e in t.events)}" for t in turns]


@pytest.mark.parametrize(
    ("codes", "max_calls", "expected"),
    [
        ("tttt", 8, ["observe:tttt"]),
        ("ttttt", 2, ["observe:tt", "observe:tt", "observe:t"]),
        ("pttt", 8, ["observe:pttt"]),  # the prompt rides with the calls that follow it
        ("ttpt", 8, ["observe:tt", "observe:pt"]),  # a new request starts a new turn
        ("tts", 8, ["observe:tt", "summarize:s"]),  # summarize flushes
        ("ttpst", 8, ["observe:tt", "summarize:ps", "observe:t"]),
        ("tte", 8, ["observe:tt", "record:e"]),  # end flushes and closes
        ("p", 8, ["record:p"]),  # a prompt with no call yet is bookkeeping only
        ("ttp", 8, ["observe:tt", "record:p"]),
        ("pe", 8, ["record:pe"]),
        ("", 8, []),
    ],
)
def test_events_are_grouped_into_turns(codes: str, max_calls: int, expected: list[str]) -> None:
    turns = plan_turns(_events(codes), max_tool_calls=max_calls, max_chars=10_000)
    assert _shape(turns) == expected


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        ([400, 400, 400], ["observe:tt", "observe:t"]),  # 1,200 chars > 1,000
        ([5000, 10, 10], ["observe:t", "observe:tt"]),  # an oversize call goes alone
        ([10, 5000, 10], ["observe:t", "observe:t", "observe:t"]),
        ([300, 300, 300], ["observe:ttt"]),  # exactly within the budget
    ],
)
def test_the_character_budget_splits_turns(sizes: list[int], expected: list[str]) -> None:
    turns = plan_turns(_events("ttt"), max_tool_calls=8, max_chars=1000, sizes=sizes)
    assert _shape(turns) == expected


def test_turn_properties_expose_calls_prompts_summary_and_end() -> None:
    events = _events("ptts")
    observe, summarize, record = plan_turns(
        [*events, _event("e", 9)], max_tool_calls=8, max_chars=1000
    )
    assert observe.prompts == (events[0],)
    assert observe.tool_calls == (events[1], events[2])
    assert observe.summarize is None
    assert not observe.ends
    assert summarize.summarize == events[3]
    assert summarize.tool_calls == ()
    assert not summarize.ends
    assert record.ends
    assert record.prompts == ()
    assert record.tool_calls == ()


@settings(max_examples=200, deadline=None)
@given(
    codes=st.text(alphabet="tttpse", max_size=40),
    max_calls=st.integers(min_value=1, max_value=9),
    sizes=st.lists(st.integers(min_value=0, max_value=700), min_size=40, max_size=40),
)
def test_turns_keep_every_event_once_in_order_within_the_limits(
    codes: str, max_calls: int, sizes: list[int]
) -> None:
    events = _events(codes)
    turns = plan_turns(events, max_tool_calls=max_calls, max_chars=1000, sizes=sizes[: len(events)])
    assert [e for t in turns for e in t.events] == events
    size_of = {e.event_id: s for e, s in zip(events, sizes, strict=False)}
    for turn in turns:
        calls = turn.tool_calls
        assert len(calls) <= max_calls
        if len(calls) > 1:
            assert sum(size_of[c.event_id] for c in calls) <= 1000
        assert (turn.kind == "observe") == bool(calls)
        assert (turn.kind == "summarize") == (turn.summarize is not None)
        # Prompts only ever lead a turn: no prompt after a call or summary in the same turn.
        kinds = [type(e) for e in turn.events]
        assert kinds == sorted(kinds, key=lambda k: k is not Prompt)


def _own(n: int, name: str = "mcp__memq__search") -> ToolCall:
    return ToolCall(event_id=f"m{n}", memory_session_id="s", project="p", occurred_at=T0,
                    tool_name=name, tool_input={"query": "cart"})  # fmt: skip


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # memq's own calls ride with the next turn like a prompt and are never shown
        ([_event("p", 0), _own(1), _event("t", 2)], ["observe:pmt"]),
        ([_event("t", 0), _own(1), _event("s", 2)], ["observe:t", "summarize:ms"]),
        ([_own(0), _own(1)], ["record:mm"]),
        ([_event("t", 0), _own(1), _event("e", 2)], ["observe:t", "record:me"]),
    ],
)
def test_memqs_own_tool_calls_are_consumed_but_never_shown(
    events: list[Event], expected: list[str]
) -> None:
    turns = plan_turns(events, max_tool_calls=8, max_chars=10_000, own_servers=("memq",))
    assert _shape(turns) == expected
    assert [e for t in turns for e in t.events] == events  # every event once, in order
    for t in turns:
        assert all(c.tool_name == "Bash" for c in t.tool_calls)
        assert all(c.event_id.startswith("m") for c in t.own_calls)


@pytest.mark.parametrize(
    ("name", "own"),
    [
        ("mcp__memq__search", True),  # Claude Code, Codex
        ("mcp_memq_timeline", True),  # Gemini CLI
        ("memq_get_observations", True),  # OpenCode
        ("mcp__notes__search", True),  # the name the user gave memq's server
        ("mcp__github__search", False),
        ("Bash", False),
        ("memquery", False),
    ],
)
def test_own_tools_are_recognised_by_each_agents_naming(name: str, own: bool) -> None:
    from pipeline.turns.own_tools import is_own_tool

    assert is_own_tool(name, ("memq", "notes")) is own
