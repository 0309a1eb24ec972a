"""The values an install is planned with and produces: where, for whom, and which files change."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

from worker.errors import WorkerError

AGENTS: tuple[str, ...] = ("claude-code", "codex", "gemini", "opencode")
"""The agents `memq install` writes settings for."""

Action = Literal["install", "uninstall"]


class InstallError(WorkerError):
    """A settings file cannot be changed safely (unreadable, not JSON/TOML, a wrong shape)."""


class UnsupportedInstallError(WorkerError):
    """The agent has no such kind of install (a project install of Codex, HTTP hooks of Gemini)."""


class HttpHooks(msgspec.Struct, frozen=True, kw_only=True):
    """Claude Code's `"type": "http"` hooks to `memq agent`, instead of command hooks."""

    url: str
    token: bool = False
    """MEMQ_AGENT_TOKEN is set: each hook sends it from the agent's environment."""


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """Whose settings: the user's (under `home`), or `project`'s own files when it is set."""

    memq: str
    """The full path of the memq console script the agent's hooks and MCP server run."""
    home: Path
    project: Path | None = None
    http: HttpHooks | None = None
    environ: dict[str, str] = msgspec.field(default_factory=dict)
    """Where the agents look for their user settings (CLAUDE_CONFIG_DIR, CODEX_HOME, XDG_*)."""
    plugin_source: Path | None = None
    """OpenCode's memq plugin file to copy; None: the one memq ships (layouts.OPENCODE_PLUGIN)."""


class Edit(msgspec.Struct, frozen=True, kw_only=True):
    """One file's change: `before`/`after` are its bytes, None where it does not exist."""

    path: Path
    before: bytes | None
    after: bytes | None
    changes: tuple[str, ...] = ()
    """The report's short list (`+ hooks.Stop`, `- mcpServers.memq`); empty: a diff instead."""
    show_diff: bool = True
    """False for a copied file (the plugin): the report names it rather than diffing it."""


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """What an install or uninstall changes; no edits means there is nothing to do."""

    agent: str
    action: Action
    edits: tuple[Edit, ...]
    notes: tuple[str, ...] = ()
    """Steps left to the user (Codex's one-time hook trust)."""


def display_path(path: Path, home: Path) -> str:
    """`path` with the home directory shown as `~`."""
    try:
        return f"~/{path.relative_to(home)}"
    except ValueError:
        return str(path)
