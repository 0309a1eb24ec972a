"""The real agents' binaries, as scripts/agents.sh installs them (pinned npm packages)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_BINARIES = {"claude-code": "claude", "codex": "codex", "gemini": "gemini", "opencode": "opencode"}


def agents_dir() -> Path:
    """Where scripts/agents.sh installs the agents (MEMQ_AGENTS_DIR, else the user's cache)."""
    given = os.environ.get("MEMQ_AGENTS_DIR")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "memq" / "agents"


def agent_binary(agent: str) -> Path:
    """The installed binary of `agent`; fails the test (never skips) when it is missing."""
    path = agents_dir() / agent / "node_modules" / ".bin" / _BINARIES[agent]
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"{agent} is not installed at {path}: ./scripts/test installs it (scripts/agents.sh)"
        )
    return path


def agent_version(agent: str) -> str:
    """The npm spec scripts/agents.sh installed for `agent` (e.g. `@openai/codex@0.169.0`)."""
    return (agents_dir() / agent / ".memq-spec").read_text().strip()
