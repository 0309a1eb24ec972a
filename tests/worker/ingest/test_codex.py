"""Codex CLI hook payloads (real captures of 0.169.0) -> events labelled agent="codex"."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.events import End, Prompt, Summarize, ToolCall
from worker.ingest.agents import AGENTS
from worker.ingest.agents.claude_code import HookPayloadError, tool_event_id
from worker.ingest.agents.registry import AgentHook, reader_for

DATA = Path(__file__).resolve().parents[2] / "data" / "codex"
NOW = datetime(2026, 12, 1, 21, 9, tzinfo=UTC)
SESSION = "01a23370-6683-7cb1-b9cf-37efe312c0ee"  # the captures' session_id


def _read(name: str, **changes: Any) -> AgentHook:
    payload = json.loads((DATA / f"{name}.json").read_text())
    payload.update(changes)
    raw = json.dumps(payload).encode()
    return reader_for("codex")(raw, project_of=lambda cwd: Path(cwd).name, host="laptop", now=NOW)


def test_codex_is_an_agent_with_a_hook_command_and_route() -> None:
    assert "codex" in AGENTS


def test_user_prompt_submit_becomes_a_prompt_labelled_codex() -> None:
    hook = _read("UserPromptSubmit")
    (event,) = hook.events
    assert isinstance(event, Prompt)
    assert event.prompt_text == "Read README.md and add a line about running the tests."
    assert (event.memory_session_id, event.project, event.occurred_at) == (SESSION, "webapp", NOW)
    assert (event.host, event.agent) == ("laptop", "codex")
    assert (hook.session_start, hook.cwd, hook.project) == (False, "/home/dev/webapp", "webapp")


def test_a_shell_call_becomes_a_tool_call_with_its_plain_text_output() -> None:
    (event,) = _read("PostToolUse-Bash").events
    assert isinstance(event, ToolCall)
    assert (event.tool_name, event.tool_input) == ("Bash", {"command": "cat README.md"})
    assert event.tool_output.startswith("# webapp\n\nA tiny demo web app.")
    assert (event.cwd, event.tool_use_id) == ("/home/dev/webapp", "call_shell_3")
    assert not event.failed
    assert event.agent == "codex"


def test_a_tool_calls_event_id_is_derived_from_session_and_call_id() -> None:
    first, again = _read("PostToolUse-Bash").events[0], _read("PostToolUse-Bash").events[0]
    # A hook Codex runs twice for one call publishes one event id: the stream keeps one copy.
    assert first.event_id == again.event_id == tool_event_id(SESSION, "call_shell_3")
    (other,) = _read("PostToolUse-apply_patch").events
    assert other.event_id == tool_event_id(SESSION, "call_patch_4") != first.event_id


def test_apply_patch_is_an_ordinary_tool_call_with_the_patch_as_input() -> None:
    (event,) = _read("PostToolUse-apply_patch").events
    assert isinstance(event, ToolCall)
    assert event.tool_name == "apply_patch"
    assert event.tool_input["command"].startswith("*** Begin Patch\n*** Update File: README.md")
    assert "Success. Updated the following files:\nM README.md" in event.tool_output


def test_an_mcp_call_keeps_codexs_name_and_the_call_tool_result() -> None:
    (event,) = _read("PostToolUse-mcp__memq__search").events
    assert isinstance(event, ToolCall)
    assert event.tool_name == "mcp__memq__search"
    assert event.tool_output == {
        "content": [{"type": "text", "text": "no memories yet"}],
        "isError": False,
    }


def test_stop_asks_for_a_summary_with_the_payloads_last_assistant_message() -> None:
    (event,) = _read("Stop").events
    assert isinstance(event, Summarize)
    assert event.last_assistant_message == "Done: I read README.md and added a Tests line."
    assert event.agent == "codex"


def test_stop_with_a_real_rollout_resends_no_calls_and_keeps_the_payloads_message() -> None:
    # A real Codex rollout (an exec_command call, its output, the answer "ok"): not a Claude
    # transcript, so nothing is reconciled from it.
    hook = _read("Stop", transcript_path=str(DATA / "rollout.jsonl"))
    (event,) = hook.events
    assert isinstance(event, Summarize)
    assert event.last_assistant_message == "Done: I read README.md and added a Tests line."


def test_session_start_asks_for_the_context_and_records_nothing() -> None:
    hook = _read("SessionStart")
    assert (hook.session_start, hook.events, hook.project) == (True, [], "webapp")


def test_session_end_becomes_an_end_with_codexs_reason() -> None:
    (event,) = _read("SessionEnd").events
    assert isinstance(event, End)
    assert (event.reason, event.agent, event.memory_session_id) == ("other", "codex", SESSION)


def test_pre_tool_use_records_nothing() -> None:
    hook = _read("PreToolUse-Bash")
    assert (hook.session_start, hook.events) == (False, [])


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"session_id": ""}, "session_id"),
        ({"hook_event_name": None}, "hook_event_name"),
    ],
)
def test_an_unusable_payload_is_refused_naming_the_field(
    changes: dict[str, Any], reason: str
) -> None:
    with pytest.raises(HookPayloadError, match=reason):
        _read("PostToolUse-Bash", **changes)


def test_a_post_tool_use_without_a_tool_name_is_refused() -> None:
    with pytest.raises(HookPayloadError, match="tool_name"):
        _read("PostToolUse-Bash", tool_name="")
