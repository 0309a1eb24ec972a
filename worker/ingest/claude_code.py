"""Claude Code hook payloads (JSON on the hook's stdin) mapped to memq events."""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, BinaryIO

import msgspec

from pipeline.events import End, Event, Prompt, Summarize, ToolCall

AGENT = "claude-code"
_TRANSCRIPT_TAIL_BYTES = 8 * 1024 * 1024  # the last assistant message is near the end
_BLOCK_BYTES = 64 * 1024
_BLANK_LINES = re.compile(r"\n{3,}")
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[^\s{}]+$")]


class HookPayloadError(Exception):
    """The hook payload is not usable (bad JSON, a missing or wrong-typed field)."""


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
    stop_hook_active: bool = False
    reason: str | None = None


_DECODER = msgspec.json.Decoder(ClaudeCodePayload)


def decode_payload(raw: bytes) -> ClaudeCodePayload:
    """Decode one hook input; HookPayloadError with a one-line reason when unusable."""
    try:
        return _DECODER.decode(raw)
    except msgspec.DecodeError as e:
        raise HookPayloadError(f"bad Claude Code hook payload: {e}") from e


def events_from_payload(
    payload: ClaudeCodePayload, *, project: str, host: str, now: datetime
) -> list[Event]:
    """The events one hook input stands for (none for hooks memq does not record)."""
    common: dict[str, Any] = {
        "memory_session_id": payload.session_id,
        "project": project,
        "occurred_at": now,
        "host": host,
        "agent": AGENT,
    }
    name = payload.hook_event_name
    if name == "UserPromptSubmit":
        if payload.prompt is None:
            raise HookPayloadError("UserPromptSubmit payload has no `prompt`")
        return [Prompt(event_id=_random_id(), prompt_text=payload.prompt, **common)]
    if name == "PostToolUse":
        if not payload.tool_name:
            raise HookPayloadError("PostToolUse payload has no `tool_name`")
        return [
            ToolCall(
                event_id=_tool_event_id(payload.session_id, payload.tool_use_id),
                tool_name=payload.tool_name,
                tool_input=payload.tool_input,
                tool_output=payload.tool_response,
                cwd=payload.cwd,
                tool_use_id=payload.tool_use_id,
                **common,
            )
        ]
    if name == "Stop":
        message = last_assistant_message(payload.transcript_path)
        return [Summarize(event_id=_random_id(), last_assistant_message=message, **common)]
    if name == "SessionEnd":
        return [End(event_id=_random_id(), reason=payload.reason, **common)]
    return []  # SessionStart and hooks memq does not record


def last_assistant_message(transcript_path: str | None) -> str | None:
    """The text of the transcript's last assistant line that has text, or None."""
    if not transcript_path:
        return None
    try:
        with open(transcript_path, "rb") as f:
            for line in _lines_from_end(f, os.fstat(f.fileno()).st_size):
                text = _assistant_text(line)
                if text:
                    return _BLANK_LINES.sub("\n\n", text)
    except OSError:
        return None
    return None


def _lines_from_end(f: BinaryIO, size: int) -> Iterator[bytes]:
    """Yield the file's lines last first, reading at most _TRANSCRIPT_TAIL_BYTES."""
    end = size
    carry = b""
    floor = max(0, size - _TRANSCRIPT_TAIL_BYTES)
    while end > floor:
        start = max(floor, end - _BLOCK_BYTES)
        f.seek(start)
        block = f.read(end - start) + carry
        lines = block.split(b"\n")
        carry = lines.pop(0) if start > floor else b""
        yield from reversed(lines)
        end = start
    if carry:
        yield carry


def _assistant_text(line: bytes) -> str | None:
    if b"assistant" not in line:
        return None
    try:
        entry = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):  # a line nested too deep is skipped too
        return None  # a malformed or partly written line is skipped
    if not isinstance(entry, dict):
        return None
    message = entry.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    if "assistant" not in (entry.get("type"), entry.get("role"), role):
        return None
    content = message.get("content") if isinstance(message, dict) else entry.get("content")
    if isinstance(content, str):
        return content.strip() or None
    if not isinstance(content, list):
        return None
    texts = [
        block["text"].strip()
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(t for t in texts if t) or None


def _tool_event_id(session_id: str, tool_use_id: str | None) -> str:
    # Claude Code gives each tool use a unique id: a re-run hook publishes the same event id.
    if not tool_use_id:
        return _random_id()
    digest = hashlib.sha256(f"{session_id}\n{tool_use_id}".encode()).hexdigest()
    return f"cc-{digest[:40]}"


def _random_id() -> str:
    return f"cc-{uuid.uuid4().hex}"
