"""Gemini CLI hook payloads (captured from 0.61.0) → events, stable ids, the prompt's own text."""

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
from tests.worker.ingest.test_cli_hook import HEAVY_MODULES, UNNEEDED_MODULES
from worker.ingest.agents import AGENTS
from worker.ingest.agents.gemini import (
    ToolResponse,
    decode_payload,
    read_hook,
    tool_output_text,
    user_prompt,
)
from worker.ingest.agents.payload import AgentHook, HookPayloadError
from worker.ingest.agents.registry import reader_for
from worker.ingest.prepare import prepare_encoded

DATA = Path(__file__).resolve().parents[2] / "data" / "gemini"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SESSION = "a66399e9-f54b-46ab-8625-7ca1526b2ba0"


def _raw(name: str, **changes: Any) -> bytes:
    payload = json.loads((DATA / f"{name}.json").read_text())
    payload.update(changes)
    return json.dumps(payload).encode()


def _read(raw: bytes) -> AgentHook:
    return read_hook(raw, project_of=lambda cwd: Path(cwd).name, host="laptop", now=NOW)


def _one(name: str, **changes: Any) -> Any:
    (event,) = _read(_raw(name, **changes)).events
    return event


def test_gemini_is_a_hook_agent_with_its_own_reader() -> None:
    assert "gemini" in AGENTS
    assert reader_for("gemini") is read_hook


def test_session_start_asks_for_the_context_and_records_nothing() -> None:
    hook = _read(_raw("SessionStart"))
    assert hook.session_start
    assert (hook.cwd, hook.project, hook.events) == ("/home/dev/webapp", "webapp", [])


def test_a_resumed_session_is_given_the_context_again() -> None:
    # Gemini's resumed history drops the first prompt that carried it (tests/agents shows it).
    assert _read(_raw("SessionStart", source="resume")).session_start
    assert _read(_raw("SessionStart", source="clear")).session_start


def test_before_agent_becomes_the_users_prompt_without_memqs_context() -> None:
    event = _one("BeforeAgent")
    assert isinstance(event, Prompt)
    assert event.prompt_text == "Read README.md and add a line about running the tests."
    assert (event.memory_session_id, event.project, event.agent, event.host) == (
        SESSION,
        "webapp",
        "gemini",
        "laptop",
    )
    # The payload's own time, not the hook's.
    assert event.occurred_at == datetime(2026, 12, 1, 21, 11, 7, 950000, tzinfo=UTC)


def test_memqs_notes_escaped_by_gemini_go_with_their_hook_context() -> None:
    # Gemini escapes `<` and `>` in hook output, so memq's own markers cannot be found in the
    # prompt: the <hook_context> block around them is what keeps them out (seen with 0.61.0).
    notes = "&lt;memq-notes&gt;\n# memq: what happened recently in webapp\n&lt;/memq-notes&gt;\n"
    prompt = f"<hook_context>{notes}</hook_context>\n\nWhat did we change?"
    event = _one("BeforeAgent", prompt=prompt)
    assert event.prompt_text == "What did we change?"
    _, raw = prepare_encoded(event, 1_000_000)
    assert b"memq-notes" not in raw
    assert b"what happened recently" not in raw


def test_a_prompt_without_injected_context_is_kept_as_typed() -> None:
    assert user_prompt("  fix <b>the</b> bug\n") == "  fix <b>the</b> bug\n"
    assert user_prompt("<hook_context>a\n</hook_context>\n\nfix it") == "fix it"


def test_after_tool_shell_output_loses_the_untrusted_wrapper_and_the_pgid() -> None:
    event = _one("AfterTool-run_shell_command")
    assert isinstance(event, ToolCall)
    assert event.tool_name == "run_shell_command"
    assert event.tool_input == {"command": "cat README.md", "description": "Show the README"}
    assert event.tool_output == (
        "Output: # webapp\n\nA tiny demo web app.\n\nRun `python app.py` to start it on port 8000."
    )
    assert (event.failed, event.cwd, event.tool_use_id) == (False, "/home/dev/webapp", None)


def test_after_tool_read_file_keeps_the_models_text() -> None:
    read = _one("AfterTool-read_file")
    assert read.tool_output.startswith("# webapp\n\nA tiny demo web app.")


def test_an_edit_keeps_its_status_and_diff_not_the_whole_file() -> None:
    edit = _one("AfterTool-replace")
    assert edit.tool_name == "replace"
    assert edit.tool_input["old_string"] == "Run `python app.py` to start it on port 8000.\n"
    status, diff = edit.tool_output.split("\n", 1)
    assert status == "Successfully modified file: /home/dev/webapp/README.md (1 replacements)."
    assert diff.endswith("@@ -3,3 +3,5 @@\n A tiny demo web app.\n \n Run `python app.py` to start "
                         "it on port 8000.\n+\n+Tests: `python -m pytest -q`.\n")  # fmt: skip
    assert "# webapp" not in edit.tool_output  # the file's first line is not in the hunk


def test_a_write_keeps_its_status_and_only_an_overwrite_its_diff() -> None:
    new = _one("AfterTool-write_file-new")
    assert new.tool_input["content"] == "Run pytest -q.\n"
    assert new.tool_output == (
        "Successfully created and wrote to new file: /home/dev/webapp/NOTES.md."
    )
    over = _one("AfterTool-write_file-overwrite")
    assert over.tool_output.startswith("Successfully overwrote file: /home/dev/webapp/NOTES.md.\n")
    assert over.tool_output.endswith("@@ -1,1 +1,2 @@\n Run pytest -q.\n+And ruff.\n")


def test_a_glob_keeps_the_paths_it_found() -> None:
    event = _one("AfterTool-glob")
    assert event.tool_output.endswith("/home/dev/webapp/NOTES.md\n/home/dev/webapp/README.md")


def test_a_search_keeps_the_matches_the_model_read() -> None:
    event = _one("AfterTool-grep_search")
    assert (event.tool_name, event.tool_input) == ("grep_search", {"pattern": "shop"})
    assert "L3: A tiny shop backend." in event.tool_output


def test_mcp_text_parts_are_joined() -> None:
    event = _one("AfterTool-mcp_memq_search")
    assert (event.tool_name, event.tool_output) == ("mcp_memq_search", "no memories yet")


def test_empty_model_text_falls_back_to_the_display() -> None:
    diff = {"fileDiff": "--- a\n+++ b\n", "fileName": "a"}
    assert tool_output_text("replace", _response(llmContent="", returnDisplay=diff)) == (
        "--- a\n+++ b\n",
        False,
    )
    assert tool_output_text("x", _response(llmContent=[], returnDisplay="shown")) == (
        "shown",
        False,
    )


def test_a_tool_error_is_a_failed_call_with_the_error_text() -> None:
    event = _one("AfterTool-read_file-missing")
    assert (event.failed, event.tool_output) == (
        True,
        "File not found: /home/dev/webapp/missing.md",
    )


def test_a_shell_command_that_exits_non_zero_is_a_failed_call() -> None:
    # Gemini reports a non-zero exit inside the output, with no `error` in the response.
    event = _one("AfterTool-run_shell_command-exit1")
    assert (event.failed, event.tool_output) == (True, "Output: (empty)\nExit Code: 1")
    text = "Output: boom\nExit Code: 1\nProcess Group PGID: 4242"
    output, failed = tool_output_text(
        "run_shell_command",
        _response(llmContent=f"<untrusted_context>\n{text}\n</untrusted_context>"),
    )
    assert (output, failed) == ("Output: boom\nExit Code: 1", True)
    assert not tool_output_text("read_file", _response(llmContent="Exit Code: 1"))[1]
    # A command that prints such a line itself is judged by the shell tool's own last one.
    printed = "<untrusted_context>\nOutput: step\nExit Code: 0\nExit Code: 1\n</untrusted_context>"
    assert tool_output_text("run_shell_command", _response(llmContent=printed)) == (
        "Output: step\nExit Code: 0\nExit Code: 1",
        True,
    )
    # Only the shell wrapper's PGID line goes: a file ending in one keeps it.
    kept = "notes\nProcess Group PGID: 7"
    assert tool_output_text("read_file", _response(llmContent=kept)) == (kept, False)


def test_after_agent_becomes_a_summarize_with_the_final_answer() -> None:
    event = _one("AfterAgent")
    assert isinstance(event, Summarize)
    assert event.last_assistant_message == "Done: I read README.md and added a Tests line."


def test_a_turn_without_text_is_summarized_without_a_message() -> None:
    # Gemini's own placeholder is no message of the model.
    event = _one("AfterAgent", prompt_response="[no response text]")
    assert isinstance(event, Summarize)
    assert event.last_assistant_message is None


def test_session_end_becomes_an_end_with_its_reason() -> None:
    event = _one("SessionEnd")
    assert isinstance(event, End)
    assert event.reason == "exit"


def test_model_hooks_record_nothing() -> None:
    assert _read(_raw("BeforeModel")).events == []


def test_event_ids_are_stable_for_a_rerun_hook_and_differ_per_call() -> None:
    first = _one("AfterTool-read_file")
    assert _one("AfterTool-read_file").event_id == first.event_id
    other_input = _one("AfterTool-read_file", tool_input={"file_path": "app.py"})
    later = _one("AfterTool-read_file", timestamp="2026-12-01T21:11:08.737Z")
    other_session = _one("AfterTool-read_file", session_id="b" * 36)
    ids = {first.event_id, other_input.event_id, later.event_id, other_session.event_id}
    assert len(ids) == 4
    assert all(i.startswith("gm-") for i in ids)
    # The prompt, summary and end of one session never share an id either.
    assert len({_one(n).event_id for n in ("BeforeAgent", "AfterAgent", "SessionEnd")}) == 3


def test_without_a_timestamp_the_hooks_time_and_fresh_ids_are_used() -> None:
    raw = json.loads((DATA / "AfterTool-read_file.json").read_text())
    del raw["timestamp"]
    a, b = (_read(json.dumps(raw).encode()).events[0] for _ in range(2))
    assert a.occurred_at == NOW
    assert a.event_id != b.event_id


def test_prepared_prompt_and_summary_leave_no_injected_context() -> None:
    for name in ("BeforeAgent", "AfterAgent"):
        _, raw = prepare_encoded(_one(name), 1_000_000)
        assert b"MEMQ-CONTEXT-MARKER" not in raw


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "bad Gemini CLI hook payload"),
        (b'{"hook_event_name": "AfterTool"}', "session_id"),
        (b'{"hook_event_name": "AfterTool", "session_id": "s"}', "no `tool_name`"),
        (b'{"hook_event_name": "BeforeAgent", "session_id": "s"}', "no `prompt`"),
    ],
)
def test_unusable_payloads_are_refused_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(HookPayloadError, match=reason):
        _read(raw)


def _response(**fields: Any) -> ToolResponse:
    payload = {"hook_event_name": "AfterTool", "session_id": "s", "tool_response": fields}
    response = decode_payload(json.dumps(payload).encode()).tool_response
    assert isinstance(response, ToolResponse)
    return response


@pytest.mark.slow  # the console script, as Gemini runs it on every tool call
def test_the_gemini_hook_imports_no_heavy_module(tmp_path: Path) -> None:
    done = subprocess.run(
        [console_script(), "hook", "gemini"],
        input=(DATA / "AfterTool-run_shell_command.json").read_text(),
        capture_output=True, text=True, timeout=30, cwd=tmp_path, check=False,
        env=subprocess_env(tmp_path, closed_port_url(), PYTHONPROFILEIMPORTTIME="1"),
    )  # fmt: skip
    assert done.returncode == 0
    assert done.stdout == ""
    imported = set(re.findall(r"\|\s+([\w.]+)\s*$", done.stderr, re.MULTILINE))
    assert "worker.ingest.agents.gemini" in imported
    assert "worker.ingest.agents.claude_code" not in imported
    assert {m for m in imported if m.split(".")[0] in HEAVY_MODULES} == set()
    assert imported & UNNEEDED_MODULES == set()
    assert "1 event(s) spooled" in done.stderr  # Redis is away: the call waits in the spool
