"""Claude Code's transcript (JSON lines): the current turn's tool calls and last answer.

Hooks do not fire for every tool call (a Read of a missing file answers `<tool_use_error>`
with no PostToolUse or PostToolUseFailure; a hook can time out or be killed), so at Stop
the turn is read back from the transcript and every finished call published again under
the event id its own hook would have used: the publish script keeps the first copy only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any, BinaryIO

import msgspec

from worker.ingest.agents.timestamps import aware_timestamp

_TAIL_BYTES = 8 * 1024 * 1024  # a turn's lines are near the end
_BLOCK_BYTES = 64 * 1024
_BLANK_LINES = re.compile(r"\n{3,}")


class TranscriptCall(msgspec.Struct, frozen=True, kw_only=True):
    """One finished tool call as the transcript holds it."""

    tool_use_id: str
    tool_name: str
    tool_input: Any
    result: Any
    failed: bool
    occurred_at: datetime | None
    cwd: str


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """The transcript's view of the turn that just ended."""

    last_assistant_message: str | None = None
    calls: list[TranscriptCall] = msgspec.field(default_factory=list)


def read_turn(transcript_path: str | None) -> Turn:
    """The last turn (since the user's last prompt) of a transcript; empty when unreadable."""
    if not transcript_path:
        return Turn()
    try:
        with open(transcript_path, "rb") as f:
            return _turn(_lines_from_end(f, os.fstat(f.fileno()).st_size))
    except OSError:
        return Turn()


def last_assistant_message(transcript_path: str | None) -> str | None:
    """The text of the transcript's last assistant line that has text, or None."""
    return read_turn(transcript_path).last_assistant_message


def _turn(lines_last_first: Iterator[bytes]) -> Turn:
    last_text: str | None = None
    results: dict[str, tuple[Any, bool]] = {}
    uses: list[TranscriptCall] = []
    in_turn = True  # until the user's own prompt: the calls before it belong to earlier turns
    for line in lines_last_first:
        entry = _entry(line)
        if entry is None:
            continue
        message = entry.get("message", entry)
        if not isinstance(message, dict):
            continue
        role = message.get("role") or entry.get("type")
        content = message.get("content")
        if role == "user" and in_turn:
            in_turn = _collect_results(content, results)
        elif role == "assistant":
            if last_text is None:
                last_text = _text_of(content)
            if in_turn:
                uses.extend(_tool_uses(entry, content, results))
        if not in_turn and last_text is not None:
            break
    return Turn(last_assistant_message=last_text, calls=list(reversed(uses)))


def _entry(line: bytes) -> dict[str, Any] | None:
    if b'"message"' not in line and b"assistant" not in line:
        return None
    try:
        entry = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):  # malformed, partly written or too deep
        return None
    return entry if isinstance(entry, dict) else None


def _collect_results(content: Any, results: dict[str, tuple[Any, bool]]) -> bool:
    """Record the line's tool results; False when it is a prompt (no tool result in it)."""
    if not isinstance(content, list):
        return False
    found = False
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            found = True
            use_id = block.get("tool_use_id")
            if isinstance(use_id, str):
                results[use_id] = (_result_text(block.get("content")), bool(block.get("is_error")))
    return found


def _tool_uses(
    entry: dict[str, Any], content: Any, results: dict[str, tuple[Any, bool]]
) -> Iterator[TranscriptCall]:
    if not isinstance(content, list):
        return
    cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else ""
    when = aware_timestamp(entry.get("timestamp"))
    for block in reversed(content):
        if not (isinstance(block, dict) and block.get("type") == "tool_use"):
            continue
        use_id, name = block.get("id"), block.get("name")
        if not (isinstance(use_id, str) and isinstance(name, str) and use_id in results):
            continue  # a call with no result yet was interrupted: nothing happened to record
        result, failed = results[use_id]
        yield TranscriptCall(
            tool_use_id=use_id, tool_name=name, tool_input=block.get("input"), result=result,
            failed=failed, occurred_at=when, cwd=str(cwd),
        )  # fmt: skip


def _result_text(content: Any) -> Any:
    # A result is a string or a list of content blocks; text blocks read best joined.
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" for b in content
    ):
        return "\n".join(str(b.get("text", "")) for b in content)
    return content


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        text = content.strip()
    elif isinstance(content, list):
        texts = [
            block["text"].strip()
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        text = "\n".join(t for t in texts if t)
    else:
        return None
    return _BLANK_LINES.sub("\n\n", text) or None


def _lines_from_end(f: BinaryIO, size: int) -> Iterator[bytes]:
    """Yield the file's lines last first, reading at most _TAIL_BYTES."""
    end = size
    carry = b""
    floor = max(0, size - _TAIL_BYTES)
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
