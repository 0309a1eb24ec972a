"""Agent settings in a temp HOME for the `memq install` tests: the user's own files, checks."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.support.ingest import console_script
from worker.cli.app import app
from worker.ops.install import layouts

RUNNER = CliRunner()
AGENTS = ["claude-code", "codex", "gemini", "opencode"]
PLUGIN = "export const MemqPlaceholder = async () => ({})\n"
_MINE = [{"type": "command", "command": "echo mine"}]
_OTHER = {"command": "other-mcp"}
# The user's own settings, per agent (paths under HOME): every key, hook and server must stay.
USER_FILES: dict[str, dict[str, str]] = {
    "claude-code": {
        ".claude/settings.json": json.dumps(
            {"model": "opus", "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": _MINE}]}},
            indent=4,
        ),
        ".claude.json": json.dumps({"numStartups": 3, "mcpServers": {"other": _OTHER}}),
    },
    "codex": {
        ".codex/hooks.json": json.dumps({"hooks": {"Stop": [{"hooks": _MINE}]}}),
        ".codex/config.toml": (
            '# mine\nmodel = "gpt-5.5"  # fast\n\n[mcp_servers.other]\ncommand = "other-mcp"\n'
        ),
    },
    "gemini": {
        ".gemini/settings.json": json.dumps({
            "general": {"vimMode": True},
            "hooks": {"AfterTool": [{"matcher": "write_file", "hooks": _MINE}]},
            "mcpServers": {"other": _OTHER},
        }),
    },
    "opencode": {
        ".config/opencode/opencode.json": json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "mcp": {"other": {"type": "local", "command": ["other-mcp"]}},
        }),
        ".config/opencode/plugin/mine.js": "export const Mine = async () => ({})\n",
    },
}  # fmt: skip
_EVENTS = {
    "claude-code": ["SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure",
                    "Stop", "SessionEnd"],
    "codex": ["SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"],
    "gemini": ["SessionStart", "BeforeAgent", "AfterTool", "AfterAgent", "SessionEnd"],
}  # fmt: skip


def temp_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME for this test, no MEMQ_* or agent variables, a placeholder OpenCode plugin
    (the real plugin, worker/ingest/agents/opencode_plugin.js, is another change's)."""
    home = tmp_path / "home"
    home.mkdir()
    for name in list(os.environ):
        if name.startswith("MEMQ_") or name in (
            "CLAUDE_CONFIG_DIR",
            "CODEX_HOME",
            "XDG_CONFIG_HOME",
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    plugin = tmp_path / "opencode_plugin.js"
    plugin.write_text(PLUGIN)
    monkeypatch.setattr(layouts, "OPENCODE_PLUGIN", plugin)
    return home


def memq(*args: str) -> Result:
    """Run `memq <args>` in this process."""
    return RUNNER.invoke(app, list(args))


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def write_user_files(home: Path, agent: str) -> dict[str, str]:
    """The user's own settings for `agent`, written under `home`."""
    for rel, text in USER_FILES[agent].items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    return USER_FILES[agent]


def read_settings(path: Path) -> Any:
    """A settings file as data (JSON or TOML)."""
    text = path.read_text()
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def contains(big: Any, small: Any) -> bool:
    """Whether everything in `small` is still in `big` (keys kept, list items kept)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and contains(big[k], v) for k, v in small.items()
        )
    if isinstance(small, list):
        return isinstance(big, list) and all(any(contains(b, s) for b in big) for s in small)
    return bool(big == small)


def assert_memq_installed(home: Path, agent: str) -> None:
    """memq's hooks (each event once) and MCP server are in the agent's user files."""
    exe = console_script()
    hook = f"{exe} hook {agent}"
    if agent == "opencode":
        assert (home / ".config/opencode/plugin/memq.js").read_text() == PLUGIN
        server = read_settings(home / ".config/opencode/opencode.json")["mcp"]["memq"]
        assert server == {
            "type": "local", "command": [exe, "mcp"], "enabled": True, "timeout": 20000,
        }  # fmt: skip
        return
    hooks_file, servers_file, table = {
        "claude-code": (".claude/settings.json", ".claude.json", "mcpServers"),
        "codex": (".codex/hooks.json", ".codex/config.toml", "mcp_servers"),
        "gemini": (".gemini/settings.json", ".gemini/settings.json", "mcpServers"),
    }[agent]
    hooks = read_settings(home / hooks_file)["hooks"]
    for event in _EVENTS[agent]:
        commands = [h["command"] for g in hooks[event] for h in g["hooks"]]
        assert commands.count(hook) == 1, (event, commands)
    assert not {"BeforeModel", "AfterModel", "BeforeToolSelection"} & set(hooks)
    server = read_settings(home / servers_file)[table]["memq"]
    assert (server["command"], server["args"]) == (exe, ["mcp"])
