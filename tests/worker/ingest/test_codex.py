"""Codex CLI hook payloads (real captures of 0.169.0) -> events labelled agent="codex"."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.events import End, Prompt, Summarize, ToolCall
from tests.support.ingest import closed_port_url, console_script, subprocess_env
from worker.ingest.agents import AGENTS
from worker.ingest.agents.claude_code import HookPayloadError, tool_event_id
from worker.ingest.agents.payload import AgentHook
from worker.ingest.agents.registry import reader_for

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


def test_an_mcp_call_keeps_codexs_name_and_the_results_text() -> None:
    (event,) = _read("PostToolUse-mcp__memq__search").events
    assert isinstance(event, ToolCall)
    assert event.tool_name == "mcp__memq__search"
    assert event.tool_output == "no memories yet"  # the CallToolResult's text blocks


def test_an_mcp_result_that_is_not_plain_text_blocks_is_kept_whole() -> None:
    image = {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
             "isError": False}  # fmt: skip
    (event,) = _read("PostToolUse-mcp__memq__search", tool_response=image).events
    assert isinstance(event, ToolCall)
    assert event.tool_output == image


def test_stop_asks_for_a_summary_with_the_payloads_last_assistant_message() -> None:
    # The capture's rollout is not here: nothing to read back, the summary request alone.
    (event,) = _read("Stop").events
    assert isinstance(event, Summarize)
    assert event.last_assistant_message == "Done: I read README.md and added a Tests line."
    assert event.agent == "codex"


def _read_raw(payload: dict[str, Any]) -> AgentHook:
    if payload.get("transcript_path") == "ROLLOUT":
        payload = {**payload, "transcript_path": str(DATA / "rollout.jsonl")}
    raw = json.dumps(payload).encode()
    return reader_for("codex")(raw, project_of=lambda cwd: Path(cwd).name, host="h", now=NOW)


def test_stop_resends_the_turns_calls_from_the_rollout_under_their_hooks_event_ids() -> None:
    # A real turn: two shell commands (one fails), a patch that applies and one that does
    # not, two tool searches, a failed memq MCP call. Codex ran PostToolUse for three.
    stop = json.loads((DATA / "Stop-with-rollout.json").read_text())
    *calls, summary = _read_raw(stop).events
    assert isinstance(summary, Summarize)
    assert summary.last_assistant_message == stop["last_assistant_message"]
    assert all(isinstance(c, ToolCall) for c in calls)
    tool_calls = [c for c in calls if isinstance(c, ToolCall)]
    assert [(c.tool_name, c.failed) for c in tool_calls] == [
        ("Bash", False),
        ("Bash", True),  # exit 1: Codex's own event says failed
        ("apply_patch", False),
        ("apply_patch", True),
        ("mcp__memq__search", True),
    ]
    inputs = [c.tool_input for c in tool_calls]
    assert inputs[:2] == [{"command": "cat README.md"}, {"command": "cat missing.txt"}]
    assert "*** Update File: README.md\n" in inputs[2]["command"]
    assert "*** Update File: nothere.py\n" in inputs[3]["command"]
    assert inputs[4] == {"query": "port"}
    outputs = [c.tool_output for c in tool_calls]
    assert outputs[0] == "# webapp\n"  # as the hook reports it, without Codex's header
    assert outputs[3].startswith("apply_patch verification failed: Failed to read file")
    assert outputs[4].startswith("Error executing tool search: no memq database")
    # The calls a hook reported come again under the same event id: the stream keeps one.
    hooked = json.loads((DATA / "PostToolUse-with-rollout.json").read_text())
    hook_ids = {_read_raw(p).events[0].event_id for p in hooked}
    assert hook_ids == {c.event_id for c in calls[:3]}
    assert {c.agent for c in calls} == {"codex"}
    assert all(c.occurred_at != NOW for c in calls)  # the rollout's own timestamps


def test_stop_without_a_readable_rollout_still_asks_for_a_summary() -> None:
    hook = _read("Stop", transcript_path="/nonexistent/rollout.jsonl")
    (event,) = hook.events
    assert isinstance(event, Summarize)
    assert event.last_assistant_message == "Done: I read README.md and added a Tests line."


def test_stop_reads_only_its_own_turn_of_the_rollout() -> None:
    stop = json.loads((DATA / "Stop-with-rollout.json").read_text())
    (event,) = _read_raw({**stop, "turn_id": "01a23457-0000-7000-8000-000000000000"}).events
    assert isinstance(event, Summarize)


def test_session_start_asks_for_the_context_and_records_nothing() -> None:
    hook = _read("SessionStart")
    assert (hook.session_start, hook.events, hook.project) == (True, [], "webapp")


def test_a_resumed_session_is_not_given_the_context_again() -> None:
    hook = _read("SessionStart", source="resume")
    assert (hook.session_start, hook.events) == (False, [])


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
    with pytest.raises(HookPayloadError, match=rf"^bad Codex hook payload: .*{reason}"):
        _read("PostToolUse-Bash", **changes)


def test_a_post_tool_use_without_a_tool_name_is_refused() -> None:
    with pytest.raises(HookPayloadError, match="tool_name"):
        _read("PostToolUse-Bash", tool_name="")


def test_a_call_without_its_output_and_a_torn_line_are_skipped(tmp_path: Path) -> None:
    stop = json.loads((DATA / "Stop-with-rollout.json").read_text())
    lines = (DATA / "rollout.jsonl").read_text().splitlines()
    # The first command's output never came (interrupted); the last line is half written.
    kept = [line for line in lines if not ('"function_call_output"' in line and "000003" in line)]
    torn = kept[-1][: len(kept[-1]) // 2]
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("\n".join([*kept[:-1], torn]))
    *calls, _summary = _read_raw({**stop, "transcript_path": str(rollout)}).events
    assert [c.tool_use_id for c in calls if isinstance(c, ToolCall)] == [
        "call_fake000006", "call_fake000009", "call_fake000012", "call_fake000021",
    ]  # fmt: skip


def test_a_failed_shell_command_is_marked_failed_from_codexs_record_of_it() -> None:
    # The payloads hold no exit code; the rollout's item_completed (written before the hook
    # runs, seen in 0.169.0) says `cat missing.txt` failed.
    hooked = json.loads((DATA / "PostToolUse-with-rollout.json").read_text())
    calls = [_read_raw(p).events[0] for p in hooked]
    assert [(c.tool_name, c.failed) for c in calls if isinstance(c, ToolCall)] == [
        ("Bash", False),
        ("Bash", True),
        ("apply_patch", False),
    ]


def test_without_the_rollout_a_shell_command_is_not_marked_failed() -> None:
    (event,) = _read("PostToolUse-Bash", transcript_path="/nonexistent/rollout.jsonl").events
    assert isinstance(event, ToolCall)
    assert not event.failed


@pytest.mark.slow  # runs the console script
def test_the_codex_hook_imports_nothing_heavy(tmp_path: Path) -> None:
    # PostToolUse runs on every tool call: the fast path, the Codex reader and the rollout
    # check load no CLI framework, client library or json module.
    payload = json.loads((DATA / "PostToolUse-with-rollout.json").read_text())[1]
    payload["transcript_path"] = str(DATA / "rollout.jsonl")
    done = subprocess.run(
        [console_script(), "hook", "codex"], input=json.dumps(payload), capture_output=True,
        text=True, timeout=30, cwd=tmp_path, check=False,
        env=subprocess_env(tmp_path, closed_port_url(), PYTHONPROFILEIMPORTTIME="1"),
    )  # fmt: skip
    assert done.returncode == 0
    imported = set(re.findall(r"\|\s+([\w.]+)\s*$", done.stderr, re.MULTILINE))
    assert {"worker.ingest.hook", "worker.ingest.agents.codex_rollout"} <= imported
    heavy = {"typer", "click", "redis", "arq", "anthropic", "openai", "aiosqlite", "httpx", "json"}
    assert {m for m in imported if m.split(".")[0] in heavy} == set()
    assert "worker.ingest.agents.transcript" not in imported  # Claude's, read at its Stop only
