"""The agents memq takes hook events from: each name maps to its payload reader."""

from __future__ import annotations

from worker.ingest.agents import AGENTS
from worker.ingest.agents.payload import HookPayloadError, HookReader


def reader_for(agent: str) -> HookReader:
    """The reader of `agent`'s hook payloads; HookPayloadError for an agent memq does not know."""
    # Imported here: each hook process loads only its own agent's module.
    if agent == "claude-code":
        from worker.ingest.agents import claude_code

        return claude_code.read_hook
    if agent == "codex":
        from worker.ingest.agents import codex

        return codex.read_hook
    if agent == "gemini":
        from worker.ingest.agents import gemini

        return gemini.read_hook
    if agent == "opencode":
        from worker.ingest.agents import opencode

        return opencode.read_hook
    raise HookPayloadError(f"unknown agent {agent!r}: memq takes hooks from {', '.join(AGENTS)}")
