"""Each agent's files and what memq puts in them: hooks, the MCP server, OpenCode's plugin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from worker.ops.install.codex_toml import drop_memq_server, put_memq_server
from worker.ops.install.hook_entries import (
    HookSpec,
    Json,
    command_line,
    install_hooks,
    uninstall_hooks,
)
from worker.ops.install.json_settings import drop_server, put_server
from worker.ops.install.model import Target, UnsupportedInstallError

OPENCODE_PLUGIN = Path(__file__).resolve().parents[2] / "ingest" / "agents" / "opencode_plugin.js"
"""memq's OpenCode plugin (package data), copied into OpenCode's plugin folder."""
CODEX_TIMEOUT_S = 3  # seconds; Codex clamps SessionEnd to 3 anyway, and the hook takes ~1 s at most
GEMINI_TIMEOUT_MS = 5000
HTTP_TIMEOUT_S = 5
HOOK_EVENTS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "claude-code": (
        ("SessionStart", None), ("UserPromptSubmit", None), ("PostToolUse", "*"),
        ("PostToolUseFailure", "*"), ("Stop", None), ("SessionEnd", None),
    ),
    "codex": (
        ("SessionStart", None), ("UserPromptSubmit", None), ("PostToolUse", "*"),
        ("Stop", None), ("SessionEnd", None),
    ),
    # Never BeforeModel/AfterModel/BeforeToolSelection: each fires per model call or chunk.
    "gemini": (
        ("SessionStart", None), ("BeforeAgent", None), ("AfterTool", "*"),
        ("AfterAgent", None), ("SessionEnd", None),
    ),
}  # fmt: skip
"""The events memq's hook listens to, each with its matcher (None: every occurrence)."""


class JsonFile(msgspec.Struct, frozen=True):
    """A JSON settings file and memq's edit of it, each way."""

    path: Path
    install: Callable[[Json], Json]
    uninstall: Callable[[Json], Json]


class TomlFile(msgspec.Struct, frozen=True):
    """A TOML settings file (Codex's config.toml) and memq's edit of it, each way."""

    path: Path
    install: Callable[[str], str]
    uninstall: Callable[[str], str]


class CopiedFile(msgspec.Struct, frozen=True):
    """A file memq owns outright (OpenCode's plugin): copied in, deleted on uninstall."""

    path: Path
    source: Path


AgentFile = JsonFile | TomlFile | CopiedFile


def agent_files(agent: str, target: Target) -> list[AgentFile]:
    """The files memq edits for `agent`; UnsupportedInstallError for an install it lacks."""
    if target.http is not None and agent != "claude-code":
        raise UnsupportedInstallError(
            f"--http is for claude-code only: {agent} runs memq's hooks as commands"
        )
    if agent == "claude-code":
        return _claude_code(target)
    if agent == "codex":
        return _codex(target)
    if agent == "gemini":
        return _gemini(target)
    if agent == "opencode":
        return _opencode(target)
    raise UnsupportedInstallError(f"unknown agent {agent!r}")


def hook_specs(agent: str, target: Target) -> list[HookSpec]:
    """memq's hook handler for each event `agent` reports to memq."""
    command = command_line(target.memq, agent)
    handler: Json = {"type": "command", "command": command}
    if agent == "codex":
        handler["timeout"] = CODEX_TIMEOUT_S
    elif agent == "gemini":
        handler = {"name": "memq", **handler, "timeout": GEMINI_TIMEOUT_MS}
    later = handler
    if target.http is not None:
        later = {"type": "http", "url": target.http.url, "timeout": HTTP_TIMEOUT_S}
        if target.http.token:
            later["headers"] = {"Authorization": "Bearer $MEMQ_AGENT_TOKEN"}
            later["allowedEnvVars"] = ["MEMQ_AGENT_TOKEN"]
    # Claude Code runs no HTTP hook for SessionStart: the context comes from a command hook.
    return [
        HookSpec(event, handler if event == "SessionStart" else later, matcher)
        for event, matcher in HOOK_EVENTS[agent]
    ]


def _claude_code(target: Target) -> list[AgentFile]:
    specs = hook_specs("claude-code", target)
    if target.project is not None:
        settings = target.project / ".claude" / "settings.json"
        servers = target.project / ".mcp.json"
    else:
        # `claude mcp add -s user` writes ~/.claude.json; CLAUDE_CONFIG_DIR moves both files.
        config_dir = target.environ.get("CLAUDE_CONFIG_DIR")
        base = Path(config_dir) if config_dir else target.home / ".claude"
        settings = base / "settings.json"
        servers = Path(config_dir) / ".claude.json" if config_dir else target.home / ".claude.json"
    entry: Json = {"type": "stdio", "command": target.memq, "args": ["mcp"]}
    return [
        _hooks_file(settings, specs, "claude-code"),
        _server_file(servers, "mcpServers", entry),
    ]


def _codex(target: Target) -> list[AgentFile]:
    if target.project is not None:
        raise UnsupportedInstallError(
            "codex reads hooks.json only from ~/.codex: run `memq install codex` without --project"
        )
    codex_home = target.environ.get("CODEX_HOME")
    base = Path(codex_home) if codex_home else target.home / ".codex"
    memq = target.memq
    return [
        _hooks_file(base / "hooks.json", hook_specs("codex", target), "codex"),
        TomlFile(base / "config.toml", lambda text: put_memq_server(text, memq), drop_memq_server),
    ]


def _gemini(target: Target) -> list[AgentFile]:
    base = target.project if target.project is not None else target.home
    specs = hook_specs("gemini", target)
    entry: Json = {"command": target.memq, "args": ["mcp"]}

    def install(settings: Json) -> Json:
        return put_server(install_hooks(settings, specs, "gemini"), "mcpServers", "memq", entry)

    def uninstall(settings: Json) -> Json:
        return drop_server(uninstall_hooks(settings, "gemini"), "mcpServers", "memq")

    return [JsonFile(base / ".gemini" / "settings.json", install, uninstall)]


def _opencode(target: Target) -> list[AgentFile]:
    if target.project is not None:
        base = target.project / ".opencode"
    else:
        config_home = target.environ.get("XDG_CONFIG_HOME")
        base = (Path(config_home) if config_home else target.home / ".config") / "opencode"
    # docs/agents/opencode.md's block: 20 s to start (OpenCode's default is 5 s).
    entry: Json = {
        "type": "local", "command": [target.memq, "mcp"], "enabled": True, "timeout": 20000,
    }  # fmt: skip
    return [
        CopiedFile(base / "plugin" / "memq.js", target.plugin_source or OPENCODE_PLUGIN),
        _server_file(base / "opencode.json", "mcp", entry),
    ]


def _hooks_file(path: Path, specs: list[HookSpec], agent: str) -> JsonFile:
    return JsonFile(
        path,
        lambda settings: install_hooks(settings, specs, agent),
        lambda settings: uninstall_hooks(settings, agent),
    )


def _server_file(path: Path, table: str, entry: Json) -> JsonFile:
    return JsonFile(
        path,
        lambda settings: put_server(settings, table, "memq", entry),
        lambda settings: drop_server(settings, table, "memq"),
    )
