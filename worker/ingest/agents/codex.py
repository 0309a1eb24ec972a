"""Codex CLI hook payloads as memq events: Claude Code's mapping, labelled "codex".

Codex's command hooks send Claude-Code-compatible JSON on stdin (the same field names,
`Bash` for shell commands, `tool_use_id`), so the Claude Code reader does the mapping, with
agent="codex". `transcript_path` names a Codex rollout, not a Claude transcript, and
codex_rollout reads what the payloads lack: whether a shell command failed (its payload has
no exit code), and at Stop the turn's calls (Codex runs no hook for most failed calls).
Stop's summary text is the payload's `last_assistant_message`. `apply_patch`, Codex's edit
tool, is an ordinary tool call.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from pipeline.events import Event, ToolCall
from worker.ingest.agents import claude_code
from worker.ingest.agents.codex_rollout import has_failed, read_turn_calls
from worker.ingest.agents.payload import SESSION_START, AgentHook, PayloadDecoder

__all__ = ["AGENT", "read_hook"]

AGENT = "codex"


class _Turn(msgspec.Struct, frozen=True):
    turn_id: str | None = None


_TURN = msgspec.json.Decoder(_Turn)
# Claude Code's payload fields, under a decoder of its own: its errors name Codex.
_decode = PayloadDecoder(claude_code.ClaudeCodePayload, "Codex hook payload")


def read_hook(
    raw: bytes, *, project_of: Callable[[str], str], host: str, now: datetime
) -> AgentHook:
    """One Codex hook input as the events it stands for (`AgentHook`, payload.py)."""
    payload = _decode(raw)
    rollout = payload.transcript_path
    # Never read as a Claude transcript: a rollout's lines are not Claude's.
    payload = msgspec.structs.replace(
        payload, transcript_path=None, tool_response=_mcp_content(payload.tool_response)
    )
    project = project_of(payload.cwd)
    events = claude_code.events_from_payload(
        payload, project=project, host=host, now=now, agent=AGENT
    )
    if payload.tool_name == "Bash" and payload.hook_event_name == "PostToolUse":
        # The payload has no exit code; Codex's rollout has already recorded the verdict.
        if has_failed(rollout, payload.tool_use_id):
            events = [msgspec.structs.replace(e, failed=True) for e in events]
    elif payload.hook_event_name == "Stop":
        turn_id = _TURN.decode(raw).turn_id  # raw decoded fine just above
        events = [*_rollout_calls(payload, rollout, turn_id, project, host, now), *events]
    # A resumed conversation holds the context it was given at its start: not again.
    starting = payload.hook_event_name == SESSION_START and payload.source != "resume"
    return AgentHook(starting, payload.cwd, project, events)


def _mcp_content(response: Any) -> Any:
    """An MCP result's content blocks (Claude Code's shape, kept as their text), else as is."""
    # Codex reports the whole CallToolResult; only its content says what the tool answered.
    if not (isinstance(response, dict) and set(response) == {"content", "isError"}):
        return response
    content = response["content"]
    texts = isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    )
    return content if texts and response["isError"] is False else response


def _rollout_calls(
    payload: claude_code.ClaudeCodePayload,
    rollout: str | None,
    turn_id: str | None,
    project: str,
    host: str,
    now: datetime,
) -> list[Event]:
    events: list[Event] = []
    for call in read_turn_calls(rollout, turn_id):
        event = ToolCall(
            event_id=claude_code.tool_event_id(payload.session_id, call.tool_use_id),
            memory_session_id=payload.session_id, project=project,
            occurred_at=call.occurred_at or now, host=host, agent=AGENT,
            tool_name=call.tool_name, tool_input=call.tool_input, tool_output=call.result,
            failed=call.failed, cwd=payload.cwd, tool_use_id=call.tool_use_id,
        )  # fmt: skip
        events.append(event)
    return events
