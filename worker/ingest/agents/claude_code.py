"""Claude Code hook payloads (JSON on the hook's stdin, or an HTTP hook's body) as memq events."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from pipeline.events import End, Event, Prompt, Summarize, ToolCall
from worker.ingest.agents.payload import (
    SESSION_START,
    AgentHook,
    HookPayloadError,
    PayloadDecoder,
    SessionId,
)
from worker.ingest.agents.responses import slim_response

__all__ = [
    "AGENT",
    "ClaudeCodePayload",
    "HookPayloadError",
    "decode_payload",
    "events_from_payload",
    "read_hook",
    "tool_event_id",
]

AGENT = "claude-code"


class ClaudeCodePayload(msgspec.Struct, frozen=True, kw_only=True):
    """The fields memq reads from any Claude Code hook input; others are ignored."""

    hook_event_name: str
    session_id: SessionId
    cwd: str = ""
    transcript_path: str | None = None
    prompt: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    tool_response: Any = None
    tool_use_id: str | None = None
    prompt_id: str | None = None
    """The user request's id (UserPromptSubmit, its tool hooks, its Stop): since 2.1."""
    error: Any = None
    """PostToolUseFailure's error text (a failed command: "Exit code 1\\n<output>")."""
    is_interrupt: bool = False
    last_assistant_message: str | None = None
    stop_hook_active: bool = False
    reason: str | None = None
    source: str | None = None
    """SessionStart's cause: startup, resume, clear or compact."""


decode_payload = PayloadDecoder(ClaudeCodePayload, "Claude Code hook payload")


def read_hook(
    raw: bytes, *, project_of: Callable[[str], str], host: str, now: datetime, agent: str = AGENT
) -> AgentHook:
    """One Claude Code hook input as the events it stands for (`AgentHook`, payload.py)."""
    payload = decode_payload(raw)
    project = project_of(payload.cwd)
    events = events_from_payload(payload, project=project, host=host, now=now, agent=agent)
    # A resumed conversation holds the context it was given at its start: not again.
    starting = payload.hook_event_name == SESSION_START and payload.source != "resume"
    if payload.hook_event_name == "Stop":  # the turn's calls read back, then the summary
        return AgentHook(starting, payload.cwd, project, events[-1:], resend=events[:-1])
    return AgentHook(starting, payload.cwd, project, events)


def events_from_payload(
    payload: ClaudeCodePayload, *, project: str, host: str, now: datetime, agent: str = AGENT
) -> list[Event]:
    """The events one hook input stands for (none for hooks memq does not record)."""
    common: dict[str, Any] = {
        "memory_session_id": payload.session_id,
        "project": project,
        "occurred_at": now,
        "host": host,
        "agent": agent,
    }
    name = payload.hook_event_name
    if name == "UserPromptSubmit":
        if payload.prompt is None:
            raise HookPayloadError("UserPromptSubmit payload has no `prompt`")
        event_id = _keyed_id(payload.session_id, "prompt", payload.prompt_id)
        return [Prompt(event_id=event_id, prompt_text=payload.prompt, **common)]
    if name in ("PostToolUse", "PostToolUseFailure"):
        if not payload.tool_name:
            raise HookPayloadError(f"{name} payload has no `tool_name`")
        failed = name == "PostToolUseFailure"
        return [
            ToolCall(
                event_id=tool_event_id(payload.session_id, payload.tool_use_id),
                tool_name=payload.tool_name,
                tool_input=payload.tool_input,
                tool_output=payload.error
                if failed
                else slim_response(payload.tool_name, payload.tool_response),
                failed=failed,
                cwd=payload.cwd,
                tool_use_id=payload.tool_use_id,
                **common,
            )
        ]
    if name == "Stop":
        # Only Stop reads the transcript: the per-call hooks do not import it.
        from worker.ingest.agents.transcript import read_turn

        # The calls of the turn no hook delivered come first, then the summary request.
        turn = read_turn(payload.transcript_path)
        message = payload.last_assistant_message or turn.last_assistant_message
        missed: list[Event] = [
            ToolCall(
                event_id=tool_event_id(payload.session_id, call.tool_use_id),
                tool_name=call.tool_name,
                tool_input=call.tool_input,
                tool_output=slim_response(call.tool_name, call.result),
                failed=call.failed,
                cwd=call.cwd or payload.cwd,
                tool_use_id=call.tool_use_id,
                **(common | {"occurred_at": call.occurred_at or now}),
            )
            for call in turn.calls
        ]
        # A Stop another hook blocked comes again, flagged: its summary is a new one.
        again = "again" if payload.stop_hook_active else "first"
        summary_id = _keyed_id(payload.session_id, f"stop-{again}", payload.prompt_id)
        return [*missed, Summarize(event_id=summary_id, last_assistant_message=message, **common)]
    if name == "SessionEnd":
        return [End(event_id=_random_id(), reason=payload.reason, **common)]
    return []  # SessionStart and hooks memq does not record


def tool_event_id(session_id: str, tool_use_id: str | None) -> str:
    """The event id of one tool call: the same for its hook and the Stop reconciliation."""
    # Claude Code gives each tool use a unique id: a re-run hook publishes the same event id.
    if not tool_use_id:
        return _random_id()
    digest = hashlib.sha256(f"{session_id}\n{tool_use_id}".encode()).hexdigest()
    return f"cc-{digest[:40]}"


def _keyed_id(session_id: str, kind: str, prompt_id: str | None) -> str:
    """A request's prompt or summary id, the same each time its hook input is sent (a relay that
    timed out, then the hook's own path): random where the agent names no request."""
    if not prompt_id:
        return _random_id()
    digest = hashlib.sha256(f"{session_id}\n{kind}\n{prompt_id}".encode()).hexdigest()
    return f"cc-{digest[:40]}"


def _random_id() -> str:
    return f"cc-{uuid.uuid4().hex}"
