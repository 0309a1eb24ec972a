"""A text placed where the real agents report it, read by memq's own hook readers.

The templates are the recorded payloads in tests/data (Claude Code 2.1.328, Codex 0.169.0):
a Read's `tool_response.file.content`, a Bash's `stdout` and `command`, a failed Bash's
`error`, an Edit's `new_string` and `structuredPatch` lines (' ', '-', '+'), a Write's
`content`, Codex's shell output (a plain string) and a prompt.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.events import Event
from worker.ingest.agents.registry import reader_for

DATA = Path(__file__).resolve().parent.parent / "data"
_NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _load(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / path).read_text())
    return loaded


_CLAUDE = "claude_code/2.1.328"
_TEMPLATES = {
    "read": _load(f"{_CLAUDE}/PostToolUse-Read.json"),
    "bash": _load(f"{_CLAUDE}/PostToolUse-Bash.json"),
    "bash-failure": _load(f"{_CLAUDE}/PostToolUseFailure-Bash.json"),
    "edit": _load(f"{_CLAUDE}/PostToolUse-Edit.json"),
    "write": _load(f"{_CLAUDE}/PostToolUse-Write.json"),
    "prompt": _load(f"{_CLAUDE}/UserPromptSubmit.json"),
    "codex-bash": _load("codex/PostToolUse-Bash.json"),
}


def _read(p: dict[str, Any], text: str) -> None:
    p["tool_response"]["file"]["content"] = text
    p["tool_response"]["file"]["numLines"] = text.count("\n") + 1


def _bash(p: dict[str, Any], text: str) -> None:
    p["tool_response"]["stdout"] = text


def _command(p: dict[str, Any], text: str) -> None:
    p["tool_input"]["command"] = text


def _failure(p: dict[str, Any], text: str) -> None:
    p["error"] = f"Exit code 1\n{text}"


def _edit(p: dict[str, Any], text: str) -> None:
    lines = text.splitlines() or [""]
    p["tool_input"]["new_string"] = text
    p["tool_response"]["newString"] = text
    hunk = p["tool_response"]["structuredPatch"][0]
    # A block replaced by itself: the text's lines removed ('-') and added ('+') between
    # two context lines (' ').
    removed, added = (f"-{line}" for line in lines), (f"+{line}" for line in lines)
    hunk["lines"] = [hunk["lines"][0], *removed, *added, " "]
    hunk["oldLines"] = hunk["newLines"] = len(lines) + 2


def _write(p: dict[str, Any], text: str) -> None:
    p["tool_input"]["content"] = text
    p["tool_response"]["content"] = text


def _prompt(p: dict[str, Any], text: str) -> None:
    p["prompt"] = f"why does this fail?\n{text}"


def _codex(p: dict[str, Any], text: str) -> None:
    p["tool_response"] = text


_PLACE: dict[str, tuple[str, Callable[[dict[str, Any], str], None]]] = {
    "claude-read": ("read", _read),
    "claude-bash-stdout": ("bash", _bash),
    "claude-bash-command": ("bash", _command),
    "claude-bash-failure": ("bash-failure", _failure),
    "claude-edit": ("edit", _edit),
    "claude-write": ("write", _write),
    "claude-prompt": ("prompt", _prompt),
    "codex-bash": ("codex-bash", _codex),
}
SHAPES: tuple[str, ...] = tuple(_PLACE)
"""Every place a text is put, named for the agent and the field."""


def agent_payload(shape: str, text: str) -> tuple[str, bytes]:
    """The agent and the hook input it sends with `text` placed as `shape` says."""
    template, place = _PLACE[shape]
    payload = copy.deepcopy(_TEMPLATES[template])
    place(payload, text)
    return "codex" if shape.startswith("codex") else "claude-code", json.dumps(payload).encode()


def agent_events(shape: str, text: str) -> list[Event]:
    """The events memq's hook reader makes of `text` placed as `shape` says."""
    agent, raw = agent_payload(shape, text)
    hook = reader_for(agent)(raw, project_of=lambda _cwd: "webapp", host="dev", now=_NOW)
    return hook.events
