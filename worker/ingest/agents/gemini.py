"""Gemini CLI hook payloads (JSON on the command hook's stdin) as memq events.

Gemini CLI has its own event names (BeforeAgent, AfterTool, AfterAgent, …), a `timestamp`
on every payload and no tool-call id, so event ids are derived from what a call is: a
hook that runs again publishes the same ids, and the publish script keeps the first copy.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from pipeline.events import End, Event, Prompt, Summarize, ToolCall
from pipeline.redaction.privacy import strip_private_tags
from worker.ingest.agents.payload import (
    SESSION_START,
    AgentHook,
    HookPayloadError,
    PayloadDecoder,
    SessionId,
)

__all__ = [
    "AGENT",
    "GeminiPayload",
    "ToolResponse",
    "decode_payload",
    "events_from_payload",
    "read_hook",
    "tool_output_text",
    "user_prompt",
]

AGENT = "gemini"

_UNTRUSTED_OPEN = "<untrusted_context>\n"
_UNTRUSTED_CLOSE = "\n</untrusted_context>"
_UNTRUSTED_ESCAPED = "&lt;/untrusted_context&gt;"
# The shell tool's last line names the process group: a new number on every run, no fact.
_PGID_LINE = re.compile(r"\nProcess Group PGID: \d+\s*\Z")
# The shell tool reports a non-zero exit as a line of its output, not as an `error`.
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)
_SHELL_TOOL = "run_shell_command"
# AfterAgent's `prompt_response` when the model's turn ended without text.
_NO_RESPONSE_TEXT = "[no response text]"
# replace and write_file put the whole file after this sentence.
_UPDATED_CODE = " Here is the updated code:"


class ToolResponse(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """AfterTool's `tool_response`: what the tool handed the model and the user."""

    llm_content: Any = None
    """A string (shell output wrapped in `<untrusted_context>`) or a list of parts (MCP)."""
    return_display: Any = None
    """A string, or for edits a `fileDiff` object with the old and new content."""
    error: Any = None
    """`{type, message}` when the tool failed (a missing file, a shell that did not start)."""


class GeminiPayload(msgspec.Struct, frozen=True, kw_only=True):
    """The fields memq reads from any Gemini CLI hook input; others are ignored."""

    hook_event_name: str
    session_id: SessionId
    timestamp: datetime | None = None
    cwd: str = ""
    prompt: str | None = None
    """BeforeAgent's prompt; headless runs prepend hook output as `<hook_context>…`."""
    prompt_response: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    tool_response: ToolResponse | None = None
    reason: str | None = None
    source: str | None = None
    """SessionStart's cause: startup, resume or clear."""


_SORTED = msgspec.json.Encoder(order="sorted")

decode_payload = PayloadDecoder(GeminiPayload, "Gemini CLI hook payload")


def read_hook(
    raw: bytes, *, project_of: Callable[[str], str], host: str, now: datetime
) -> AgentHook:
    """One Gemini CLI hook input as the events it stands for (`AgentHook`, payload.py)."""
    payload = decode_payload(raw)
    project = project_of(payload.cwd)
    events = events_from_payload(payload, project=project, host=host, now=now)
    # Resumed sessions too, unlike Claude Code's: Gemini rebuilds the history without any user
    # message that starts with <hook_context>, and in headless runs that is the first prompt,
    # context and all (0.61.0 convertSessionToClientHistory), so the context is gone.
    starting = payload.hook_event_name == SESSION_START
    return AgentHook(starting, payload.cwd, project, events)


def events_from_payload(
    payload: GeminiPayload, *, project: str, host: str, now: datetime
) -> list[Event]:
    """The events one hook input stands for (none for hooks memq does not record)."""
    occurred_at = _aware(payload.timestamp) if payload.timestamp else now
    common: dict[str, Any] = {
        "memory_session_id": payload.session_id,
        "project": project,
        "occurred_at": occurred_at,
        "host": host,
        "agent": AGENT,
    }
    name = payload.hook_event_name
    if name == "BeforeAgent":
        if payload.prompt is None:
            raise HookPayloadError("BeforeAgent payload has no `prompt`")
        text = user_prompt(payload.prompt)
        return [Prompt(event_id=_event_id(payload), prompt_text=text, **common)]
    if name == "AfterTool":
        if not payload.tool_name:
            raise HookPayloadError("AfterTool payload has no `tool_name`")
        output, failed = tool_output_text(payload.tool_name, payload.tool_response)
        return [
            ToolCall(
                event_id=_event_id(payload),
                tool_name=payload.tool_name,
                tool_input=payload.tool_input,
                tool_output=output,
                failed=failed,
                cwd=payload.cwd,
                **common,
            )
        ]
    if name == "AfterAgent":
        message = payload.prompt_response
        if message == _NO_RESPONSE_TEXT:
            message = None
        return [Summarize(event_id=_event_id(payload), last_assistant_message=message, **common)]
    if name == "SessionEnd":
        return [End(event_id=_event_id(payload), reason=payload.reason, **common)]
    return []  # SessionStart (answered with the context) and hooks memq does not record


def user_prompt(prompt: str) -> str:
    """The user's own words: without the `<hook_context>` block Gemini put before them."""
    # Preparation strips every withheld region anyway; this also drops the blank line
    # Gemini puts after the block, so the stored prompt starts with the user's text.
    if not prompt.lstrip().startswith("<hook_context"):
        return prompt
    return strip_private_tags(prompt).lstrip()


def tool_output_text(tool_name: str, response: ToolResponse | None) -> tuple[Any, bool]:
    """The tool's result as the model read it, and whether the call failed."""
    if response is None:
        return None, False
    if response.error is not None:
        message = response.error.get("message") if isinstance(response.error, dict) else None
        return (message or response.error), True
    text = _content_text(response.llm_content)
    display = response.return_display
    if text:
        if tool_name == _SHELL_TOOL:
            # The last one: the command's own output (before it) may print such a line too.
            codes = _EXIT_CODE.findall(text)
            return text, bool(codes) and int(codes[-1]) != 0
        return _edit_text(text, display), False
    if isinstance(display, dict) and isinstance(display.get("fileDiff"), str):
        return display["fileDiff"], False
    return (display if display != "" else None), False


def _edit_text(text: str, display: Any) -> str:
    # An edit or a write answers the whole file as it now is: sending that would cost
    # observer tokens on every edit and ship every line of the file. The diff is what
    # changed; a new file's content is in the call's input already.
    status, marker, _ = text.partition(_UPDATED_CODE)
    if not marker or not isinstance(display, dict):
        return text
    diff = display.get("fileDiff")
    if display.get("isNewFile") is True or not isinstance(diff, str):
        return status
    return f"{status}\n{diff}"


def _content_text(content: Any) -> str:
    # llmContent is a string, one part or a list of parts; only text parts are kept.
    if isinstance(content, str):
        return _unwrap(content)
    parts = [content] if isinstance(content, dict) else content
    if not isinstance(parts, list):
        return ""
    texts = [p.get("text") for p in parts if isinstance(p, dict)]
    return "\n".join(_unwrap(t) for t in texts if isinstance(t, str) and t)


def _unwrap(text: str) -> str:
    if not (text.startswith(_UNTRUSTED_OPEN) and text.endswith(_UNTRUSTED_CLOSE)):
        return text  # a file's own text is kept as it is, even a PGID-like last line
    inner = text[len(_UNTRUSTED_OPEN) : -len(_UNTRUSTED_CLOSE)]
    return _PGID_LINE.sub("", inner.replace(_UNTRUSTED_ESCAPED, "</untrusted_context>"))


def _event_id(payload: GeminiPayload) -> str:
    """Stable for a hook that runs again: no call id, so the call's own fields make it."""
    if payload.timestamp is None:
        return f"gm-{uuid.uuid4().hex}"  # nothing ties two runs together: never merge calls
    parts = [
        payload.session_id,
        payload.timestamp.isoformat(),
        payload.hook_event_name,
        payload.tool_name or "",
        _SORTED.encode(payload.tool_input).decode(),
    ]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return f"gm-{digest[:40]}"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
