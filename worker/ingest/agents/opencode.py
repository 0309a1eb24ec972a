"""OpenCode hook payloads, as memq's plugin (opencode_plugin.js) sends them, as memq events.

OpenCode has no command hooks: the plugin runs inside it and POSTs one JSON object per
event to `memq agent` at `/hooks/opencode` (or, when that is down, pipes it to
`memq hook opencode`). The object, defined by memq (every field but `hook` and
`session_id` optional):

    hook          "session_start" | "prompt" | "tool_call" | "summarize" | "end"
    session_id    OpenCode's sessionID ("ses_…")
    directory     the plugin context's `directory` (the project is resolved from it,
                  else from `worktree`)
    worktree      the plugin context's `worktree`
    message_id    prompt: the user message's id (the event id derives from it)
    prompt        prompt: the user message's text parts, joined by blank lines
    tool          tool_call: the tool's name (`bash`, `read`, `memq_search`, …)
    call_id       tool_call: OpenCode's callID (the event id derives from it)
    input         tool_call: the tool's args
    output        tool_call: `output.output`, or an MCP tool's `content` list (stored as
                  its text blocks' text)
    failed        tool_call: bash exited non-zero, or the MCP result has `isError`
    last_assistant_message   summarize: the session's last assistant text part
    reason        end: why the session ended (`dispose` when OpenCode shut down)
    event_key     summarize, end: the plugin's own id for the event (the event id derives
                  from it; a plugin older than it gets a random event id)

`session_start` records nothing: the answer is the project's context (the SessionStart
JSON Claude Code gets), which the plugin adds to the system prompt.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from typing import Any

import msgspec

from pipeline.events import End, Event, Prompt, Summarize, ToolCall
from worker.ingest.agents.payload import AgentHook, HookPayloadError, PayloadDecoder, SessionId
from worker.ingest.agents.responses import slim_response

__all__ = ["AGENT", "OpenCodePayload", "decode_payload", "plugin_source", "read_hook"]

AGENT = "opencode"
PLUGIN_FILE = "opencode_plugin.js"


class OpenCodePayload(msgspec.Struct, frozen=True, kw_only=True):
    """One event from memq's OpenCode plugin (fields in the module docstring)."""

    hook: str
    session_id: SessionId
    directory: str = ""
    worktree: str = ""
    message_id: str | None = None
    prompt: str | None = None
    tool: str | None = None
    call_id: str | None = None
    input: Any = None
    output: Any = None
    failed: bool = False
    last_assistant_message: str | None = None
    reason: str | None = None
    event_key: str | None = None


decode_payload = PayloadDecoder(OpenCodePayload, "OpenCode plugin payload")


def read_hook(
    raw: bytes, *, project_of: Callable[[str], str], host: str, now: datetime
) -> AgentHook:
    """One plugin event as the events it stands for (`AgentHook`, payload.py)."""
    payload = decode_payload(raw)
    cwd = payload.directory or payload.worktree
    project = project_of(cwd)
    events = _events(payload, project=project, host=host, now=now, cwd=cwd)
    return AgentHook(payload.hook == "session_start", cwd, project, events)


def _events(
    payload: OpenCodePayload, *, project: str, host: str, now: datetime, cwd: str
) -> list[Event]:
    common: dict[str, Any] = {
        "memory_session_id": payload.session_id,
        "project": project,
        "occurred_at": now,
        "host": host,
        "agent": AGENT,
    }
    session = payload.session_id
    if payload.hook == "prompt":
        if payload.prompt is None:
            raise HookPayloadError("OpenCode prompt payload has no `prompt`")
        event_id = _derived_id(session, "prompt", payload.message_id)
        return [Prompt(event_id=event_id, prompt_text=payload.prompt, **common)]
    if payload.hook == "tool_call":
        if not payload.tool:
            raise HookPayloadError("OpenCode tool_call payload has no `tool`")
        return [
            ToolCall(
                event_id=_derived_id(session, "tool", payload.call_id),
                tool_name=payload.tool,
                tool_input=payload.input,
                tool_output=slim_response(payload.tool, payload.output),  # MCP blocks: text
                failed=payload.failed,
                cwd=cwd,
                tool_use_id=payload.call_id,
                **common,
            )
        ]
    if payload.hook == "summarize":
        message = payload.last_assistant_message
        event_id = _derived_id(session, "summarize", payload.event_key)
        return [Summarize(event_id=event_id, last_assistant_message=message, **common)]
    if payload.hook == "end":
        event_id = _derived_id(session, "end", payload.event_key)
        return [End(event_id=event_id, reason=payload.reason, **common)]
    return []  # session_start, and events a newer plugin sends that memq does not record


def plugin_source() -> str:
    """The plugin's JavaScript, as installed with memq (copy it to ~/.config/opencode/plugin/)."""
    return resources.files(__package__).joinpath(PLUGIN_FILE).read_text(encoding="utf-8")


def _derived_id(session_id: str, kind: str, given: str | None) -> str:
    # The same OpenCode id gives the same event id: a payload sent twice (the HTTP post timed
    # out after memq took it, then the command fallback) is stored once.
    if not given:
        return _random_id()
    digest = hashlib.sha256(f"{session_id}\n{kind}\n{given}".encode()).hexdigest()
    return f"oc-{digest[:40]}"


def _random_id() -> str:
    return f"oc-{uuid.uuid4().hex}"
