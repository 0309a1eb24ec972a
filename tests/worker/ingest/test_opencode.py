"""memq's OpenCode plugin payloads -> events; the plugin file shipped with the package."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.events import End, Prompt, Summarize, ToolCall
from worker.ingest.agents import AGENTS, opencode
from worker.ingest.agents.payload import HookPayloadError
from worker.ingest.agents.registry import reader_for

NOW = datetime(2026, 12, 1, 21, 18, tzinfo=UTC)
SESSION = "ses_dcc86c9aeffe3GC9sE0ONUURhX"
DIRECTORY = "/home/dev/webapp/src"
# Captured from OpenCode 1.18.33 by a probe plugin (the research notes on agents).
CAPTURED = Path(__file__).resolve().parents[2] / "data" / "opencode"


def _read(hook: str, **fields: Any) -> Any:
    raw = json.dumps(
        {
            "hook": hook,
            "session_id": SESSION,
            "directory": DIRECTORY,
            "worktree": "/home/dev/webapp",
        }
        | fields
    ).encode()
    seen: list[str] = []

    def project_of(cwd: str) -> str:
        seen.append(cwd)
        return "webapp"

    hook_input = opencode.read_hook(raw, project_of=project_of, host="laptop", now=NOW)
    assert seen == [DIRECTORY]
    return hook_input


def test_opencode_is_an_agent_with_its_reader() -> None:
    assert "opencode" in AGENTS
    assert reader_for("opencode") is opencode.read_hook


def test_a_prompt_keeps_its_text_and_derives_its_id_from_the_message() -> None:
    hook = _read("prompt", prompt="Add a Tests line", message_id="msg_1")
    (event,) = hook.events
    assert isinstance(event, Prompt)
    assert (event.prompt_text, event.project, event.occurred_at) == (
        "Add a Tests line",
        "webapp",
        NOW,
    )
    assert (event.memory_session_id, event.agent, event.host) == (SESSION, "opencode", "laptop")
    assert (hook.session_start, hook.cwd, hook.project) == (False, DIRECTORY, "webapp")
    again = _read("prompt", prompt="Add a Tests line", message_id="msg_1").events[0]
    assert again.event_id == event.event_id


def test_a_tool_call_carries_args_output_and_call_id() -> None:
    (event,) = _read(
        "tool_call", tool="bash", call_id="call_bash_2", input={"command": "cat README.md"},
        output="# webapp\n", failed=False,
    ).events  # fmt: skip
    assert isinstance(event, ToolCall)
    assert (event.tool_name, event.tool_input, event.tool_output) == (
        "bash",
        {"command": "cat README.md"},
        "# webapp\n",
    )
    assert (event.tool_use_id, event.cwd, event.failed) == ("call_bash_2", DIRECTORY, False)
    assert event.event_id.startswith("oc-")


def test_the_same_call_id_gives_the_same_event_id_and_another_session_another() -> None:
    one = _read("tool_call", tool="read", call_id="c1").events[0]
    same = _read("tool_call", tool="read", call_id="c1").events[0]
    other = _read("tool_call", tool="read", call_id="c2").events[0]
    assert one.event_id == same.event_id != other.event_id
    raw = json.dumps({"hook": "tool_call", "session_id": "ses_x", "tool": "read", "call_id": "c1"})
    elsewhere = opencode.read_hook(
        raw.encode(), project_of=lambda cwd: "p", host="h", now=NOW
    ).events[0]
    assert elsewhere.event_id != one.event_id


def test_a_failed_call_and_an_mcp_content_output_as_its_text() -> None:
    content = [{"type": "text", "text": "no memories yet"}]
    (event,) = _read(
        "tool_call", tool="memq_search", call_id="c5", input={"query": "port"}, output=content,
        failed=True,
    ).events  # fmt: skip
    assert isinstance(event, ToolCall)
    assert (event.tool_output, event.failed) == ("no memories yet", True)


def test_summarize_end_and_session_start() -> None:
    (summary,) = _read("summarize", last_assistant_message="Done: added a Tests line.").events
    assert isinstance(summary, Summarize)
    assert summary.last_assistant_message == "Done: added a Tests line."
    (end,) = _read("end", reason="dispose").events
    assert isinstance(end, End)
    assert end.reason == "dispose"
    start = _read("session_start")
    assert (start.session_start, start.events, start.project) == (True, [], "webapp")


def test_a_summarize_or_end_sent_twice_has_one_event_id_from_the_plugins_key() -> None:
    for hook in ("summarize", "end"):
        first, again, other = (_read(hook, event_key=k).events[0] for k in ("k1", "k1", "k2"))
        assert first.event_id == again.event_id != other.event_id
        twin = "summarize" if hook == "end" else "end"
        assert first.event_id != _read(twin, event_key="k1").events[0].event_id
    # A plugin older than the key: a random id, as before (never two events as one).
    unkeyed = {_read("summarize").events[0].event_id for _ in range(2)}
    assert len(unkeyed) == 2


def test_an_unknown_hook_records_nothing() -> None:
    assert _read("session.compacted").events == []


def test_the_worktree_stands_in_for_a_missing_directory() -> None:
    raw = json.dumps({"hook": "end", "session_id": SESSION, "worktree": "/home/dev/webapp"})
    seen: list[str] = []
    opencode.read_hook(raw.encode(), project_of=lambda c: seen.append(c) or "w", host="h", now=NOW)
    assert seen == ["/home/dev/webapp"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "bad OpenCode plugin payload"),
        (b'{"hook": "prompt"}', "session_id"),
        (b'{"hook": "prompt", "session_id": "has space"}', "session_id"),
        (b'{"hook": "prompt", "session_id": "ses_1"}', "no `prompt`"),
        (b'{"hook": "tool_call", "session_id": "ses_1"}', "no `tool`"),
    ],
)
def test_unusable_payloads_are_refused_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(HookPayloadError, match=reason):
        opencode.read_hook(raw, project_of=lambda cwd: "p", host="h", now=NOW)


def test_the_plugin_ships_with_the_package_and_imports_no_npm_package() -> None:
    source = opencode.plugin_source()
    assert "/hooks/opencode" in source
    imports = [line for line in source.splitlines() if line.startswith("import ")]
    assert imports
    assert all(' from "node:' in line for line in imports), imports
    for hook in ("chat.message", "tool.execute.after", "experimental.chat.system.transform"):
        assert f'"{hook}"' in source
    assert "session.idle" in source
    assert "dispose" in source


def test_the_captured_payloads_name_the_fields_the_plugin_reads() -> None:
    # What the plugin reads from OpenCode, as OpenCode 1.18.33 sent it (research capture).
    after = json.loads((CAPTURED / "tool.execute.after-bash.json").read_text())
    assert {"tool", "sessionID", "callID", "args"} <= after["input"].keys()
    assert after["output"]["metadata"]["exit"] == 0
    mcp = json.loads((CAPTURED / "tool.execute.after-memq_search.json").read_text())
    assert {"content", "isError"} <= mcp["output"].keys()
    message = json.loads((CAPTURED / "chat.message.json").read_text())
    assert message["output"]["parts"][0]["type"] == "text"
    assert message["output"]["message"]["id"]
