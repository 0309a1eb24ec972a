"""Settling a turn, with no worker: a reply, the turn's events and the conversation in; rows,
an outcome and the next conversation out."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from pipeline.events import Event
from pipeline.outcomes import Outcome
from pipeline.prompting.conversation import (
    Exchange,
    ObserverState,
    conversation_state,
    user_message,
)
from pipeline.prompting.mode_files import load_mode
from pipeline.records import TurnRows
from pipeline.replies.parser import parse_agent_xml
from pipeline.turns.batching import TurnPlan, plan_turns
from pipeline.turns.decide import Policy
from pipeline.turns.settle import DROPPED_RAW_CHARS, Answer, HistoryLimits, record, settle
from tests.support.worker_harness import end, prompt, summarize, tool_call

CODE = load_mode("code")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LIMITS = HistoryLimits(turns=8, chars=100_000)
POLICY = Policy(quota_pause_s=300.0, max_attempts=5, retry_base_s=2.0, retry_max_s=120.0)
OBSERVATION = (
    "<observation><type>discovery</type><title>Ran the build</title>"
    "<narrative>It passed.</narrative></observation>"
)
SUMMARY = "<summary><request>fix it</request><completed>fixed</completed></summary>"


def _plan(*events: Event) -> TurnPlan:
    (plan,) = plan_turns(list(events), max_tool_calls=8, max_chars=100_000)
    return plan


def _answer(text: str, user: str = "the calls") -> Answer:
    parsed = parse_agent_xml(text, valid_types=CODE.type_ids)
    return Answer(
        user=user, text=text, parsed=parsed, model="m1", provider="anthropic",
        input_tokens=100, cached_input_tokens=60, output_tokens=20,
    )  # fmt: skip


def _state() -> ObserverState:
    return ObserverState(system="init", project="demo", prompt_number=1, told_prompt_number=1)


def test_observations_are_stored_and_the_exchange_joins_the_conversation() -> None:
    plan = _plan(prompt("s1", 2, "now the tests"), tool_call("s1", 3))
    state = conversation_state(CODE, "s1", _state(), plan)
    user, told = user_message(CODE, plan, state, 4000)
    assert told is not None
    before = msgspec.structs.replace(state, history=list(state.history))
    settled = settle("s1", plan, state, _answer(OBSERVATION, user), told=told, history=LIMITS,
                     now=NOW, policy=POLICY)  # fmt: skip
    assert settled.result.outcome is Outcome.STORED
    (row,) = settled.rows.observations
    assert (row.title, row.prompt_number, row.model) == ("Ran the build", 2, "m1")
    assert row.created_at == plan.events[0].occurred_at  # the turn's time, not the clock's
    assert row.source_event_ids == [e.event_id for e in plan.events]
    assert [p.prompt_text for p in settled.rows.prompts] == ["now the tests"]
    (usage,) = settled.rows.usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (100, 60, 20)
    assert usage.created_at == NOW
    assert settled.state.history == [Exchange(user=user, assistant=OBSERVATION)]
    assert settled.state.told_prompt_number == 2  # told once: the next turn does not repeat it
    assert state == before  # the conversation passed in is never changed


def test_a_summary_is_stored_from_a_summary_turn() -> None:
    plan = _plan(summarize("s1"))
    settled = settle(
        "s1", plan, _state(), _answer(SUMMARY), told=None, history=LIMITS, now=NOW, policy=POLICY
    )
    assert settled.result.outcome is Outcome.STORED
    assert [s.request for s in settled.rows.summaries] == ["fix it"]
    assert settled.rows.observations == []


@pytest.mark.parametrize("text", ["", "   ", "<skip_summary/>"])
def test_an_empty_reply_to_tool_calls_is_a_skip(text: str) -> None:
    settled = settle("s1", _plan(tool_call("s1", 1)), _state(), _answer(text), told=None,
                     history=LIMITS, now=NOW, policy=POLICY)  # fmt: skip
    assert settled.result.outcome is Outcome.SKIPPED
    assert (settled.rows.observations, settled.rows.dropped) == ([], [])
    assert len(settled.rows.usage) == 1  # the call still cost tokens
    assert len(settled.state.history) == 1


@pytest.mark.parametrize(
    ("kind", "text", "category"),
    [
        ("observe", "I looked at the build and it seems fine.", "prose"),
        ("observe", "<observation><title>t</title>", "xml_no_complete_block"),
        ("summarize", OBSERVATION, "summary_as_observation"),
        ("summarize", "", "idle"),  # only a summary turn has its own skip
    ],
)
def test_other_replies_are_dropped_with_their_category_and_kept(
    kind: str, text: str, category: str
) -> None:
    plan = _plan(tool_call("s1", 1)) if kind == "observe" else _plan(summarize("s1"))
    settled = settle(
        "s1", plan, _state(), _answer(text), told=None, history=LIMITS, now=NOW, policy=POLICY
    )
    assert settled.result.outcome is Outcome.DROPPED
    assert settled.result.category == category
    assert settled.result.label == f"dropped:{category}"
    (dropped,) = settled.rows.dropped
    assert (dropped.category, dropped.raw, dropped.created_at) == (category, text, NOW)
    assert dropped.turn_kind == ("observation" if kind == "observe" else "summary")


def test_a_dropped_reply_is_kept_truncated() -> None:
    text = "word " * DROPPED_RAW_CHARS
    settled = settle("s1", _plan(tool_call("s1", 1)), _state(), _answer(text), told=None,
                     history=LIMITS, now=NOW, policy=POLICY)  # fmt: skip
    (dropped,) = settled.rows.dropped
    assert len(dropped.raw) <= DROPPED_RAW_CHARS + 100
    assert len(dropped.raw) < len(text)


def test_quota_prose_pauses_writes_nothing_and_keeps_the_conversation() -> None:
    reset_at = int(NOW.timestamp()) + 900
    text = f"Claude usage limit reached|{reset_at}"
    state = _state()
    settled = settle("s1", _plan(tool_call("s1", 1)), state, _answer(text), told=None,
                     history=LIMITS, now=NOW, policy=POLICY)  # fmt: skip
    assert settled.result.outcome is Outcome.PAUSED
    assert settled.result.stop
    assert settled.result.reason == "observer replied with quota prose"
    # from the reset time in the reply, measured from `now`
    assert settled.decision.pause_provider_s == settled.result.defer_s == 900.0
    assert settled.rows == TurnRows()
    assert settled.state is state


def test_auth_prose_pauses_for_the_configured_time() -> None:
    settled = settle("s1", _plan(tool_call("s1", 1)), _state(), _answer("Invalid API key"),
                     told=None, history=LIMITS, now=NOW, policy=POLICY)  # fmt: skip
    assert settled.result.outcome is Outcome.PAUSED
    assert settled.decision.pause_provider_s == POLICY.quota_pause_s


def test_the_history_stays_within_its_limits() -> None:
    state = _state()
    state.history = [Exchange(user=f"u{i}", assistant=f"a{i}") for i in range(3)]
    settled = settle("s1", _plan(tool_call("s1", 1)), state, _answer(OBSERVATION, "u3"),
                     told=None, history=HistoryLimits(turns=2, chars=100_000), now=NOW,
                     policy=POLICY)  # fmt: skip
    assert [e.user for e in settled.state.history] == ["u2", "u3"]


def test_a_bookkeeping_turn_records_its_requests_only() -> None:
    plan = _plan(prompt("s1", 2, "next request"), end("s1"))
    state = conversation_state(CODE, "s1", _state(), plan)
    settled = record("s1", plan, state, policy=POLICY, now=NOW)
    assert settled.result.outcome is Outcome.RECORDED
    assert [(p.prompt_number, p.prompt_text) for p in settled.rows.prompts] == [(2, "next request")]
    assert settled.rows.usage == []
    assert settled.state.prompt_number == 2
    assert settled.state.told_prompt_number == 1  # told with the next observer turn


@pytest.mark.parametrize("fresh", [True, False], ids=["opening", "continued"])
def test_requests_without_a_number_are_numbered_as_the_conversation_counts_them(
    fresh: bool,
) -> None:
    # Every agent's hook publishes prompts without a number: the rows must not all say 0.
    first = msgspec.structs.replace(prompt("s1", 1, "first"), prompt_number=None)
    second = msgspec.structs.replace(prompt("s1", 2, "second"), prompt_number=None)
    plan = _plan(first, second, end("s1"))
    state = conversation_state(CODE, "s1", None if fresh else _state(), plan)
    settled = record("s1", plan, state, policy=POLICY, now=NOW)
    expected = [(1, "first"), (2, "second")] if fresh else [(2, "first"), (3, "second")]
    assert [(p.prompt_number, p.prompt_text) for p in settled.rows.prompts] == expected
    assert settled.state.prompt_number == expected[-1][0]
