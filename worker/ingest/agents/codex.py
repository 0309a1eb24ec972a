"""Codex CLI hook payloads as memq events: Claude Code's mapping, labelled "codex".

Codex's command hooks send Claude-Code-compatible JSON on stdin (the same field names,
`Bash` for shell commands, `tool_use_id`), so the Claude Code reader does the mapping. Two
things differ: the events say agent="codex", and Stop takes its summary text from the
payload's `last_assistant_message` alone, because `transcript_path` names a Codex rollout,
which the Claude transcript reader does not understand (no calls are re-sent at Stop).
`apply_patch`, Codex's edit tool, is an ordinary tool call.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import msgspec

from worker.ingest.agents import claude_code
from worker.ingest.agents.registry import SESSION_START, AgentHook

__all__ = ["AGENT", "read_hook"]

AGENT = "codex"


def read_hook(
    raw: bytes, *, project_of: Callable[[str], str], host: str, now: datetime
) -> AgentHook:
    """One Codex hook input as the events it stands for (see the registry)."""
    payload = claude_code.decode_payload(raw)
    # Not read as a Claude transcript: a rollout's lines would only ever yield nothing.
    payload = msgspec.structs.replace(payload, transcript_path=None)
    project = project_of(payload.cwd)
    events = claude_code.events_from_payload(
        payload, project=project, host=host, now=now, agent=AGENT
    )
    return AgentHook(payload.hook_event_name == SESSION_START, payload.cwd, project, events)
