"""`memq install` options: --project, Claude Code's --http, and what the report tells the user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.agent_settings import memq, read_settings, snapshot, temp_home
from tests.support.ingest import console_script


@pytest.fixture(name="home")
def _fix_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return temp_home(tmp_path, monkeypatch)


@pytest.fixture(name="project")
def _fix_project(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    project = home / "webapp"
    project.mkdir()
    monkeypatch.chdir(project)
    return project


@pytest.mark.parametrize(
    ("agent", "files"),
    [
        ("claude-code", [".claude/settings.json", ".mcp.json"]),
        ("gemini", [".gemini/settings.json"]),
        ("opencode", [".opencode/opencode.json", ".opencode/plugin/memq.js"]),
    ],
)
def test_project_writes_the_projects_own_files_only(
    home: Path, project: Path, agent: str, files: list[str]
) -> None:
    result = memq("install", agent, "--project")
    assert result.exit_code == 0, result.output
    assert sorted(snapshot(home)) == sorted(f"webapp/{f}" for f in files)
    assert memq("install", agent, "--project").stdout.startswith("memq is already installed")
    assert memq("uninstall", agent, "--project").exit_code == 0
    assert all(".memq-backup-" in name for name in snapshot(home))  # the deleted files' backups


def test_claude_code_project_server_is_in_mcp_json(project: Path) -> None:
    assert "asks once" in memq("install", "claude-code", "--project").stdout
    server = read_settings(project / ".mcp.json")["mcpServers"]["memq"]
    assert server == {"type": "stdio", "command": console_script(), "args": ["mcp"]}


def _claude_hooks(home: Path) -> dict[str, list[dict[str, object]]]:
    hooks: dict[str, list[dict[str, object]]] = {}
    for event, groups in read_settings(home / ".claude/settings.json")["hooks"].items():
        hooks[event] = [handler for group in groups for handler in group["hooks"]]
    return hooks


def test_http_hooks_go_to_memq_agent_and_session_start_stays_a_command(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMQ_AGENT_PORT", "9876")
    result = memq("install", "claude-code", "--http")
    assert result.exit_code == 0, result.output
    assert "memq agent" in result.stdout
    hooks = _claude_hooks(home)
    command = {"type": "command", "command": f"{console_script()} hook claude-code"}
    assert hooks.pop("SessionStart") == [command]
    url = "http://127.0.0.1:9876/hooks/claude-code"
    assert set(hooks) == {
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "SessionEnd",
    }
    assert all(
        handlers == [{"type": "http", "url": url, "timeout": 5}] for handlers in hooks.values()
    )


def test_http_hooks_send_the_token_from_the_agents_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cret-token-0123456789"
    monkeypatch.setenv("MEMQ_AGENT_TOKEN", secret)
    assert memq("install", "claude-code", "--http").exit_code == 0
    handler = _claude_hooks(home)["Stop"][0]
    assert handler["headers"] == {"Authorization": "Bearer $MEMQ_AGENT_TOKEN"}
    assert handler["allowedEnvVars"] == ["MEMQ_AGENT_TOKEN"]
    assert all(secret.encode() not in text for text in snapshot(home).values())


def test_switching_between_command_and_http_hooks_replaces_memqs_handlers(home: Path) -> None:
    memq("install", "claude-code", "--http")
    assert memq("install", "claude-code").exit_code == 0
    hooks = _claude_hooks(home)
    assert all(len(handlers) == 1 for handlers in hooks.values())
    assert {h["type"] for handlers in hooks.values() for h in handlers} == {"command"}
    memq("uninstall", "claude-code")
    assert not (home / ".claude/settings.json").exists()


def test_a_hand_written_memq_hook_is_replaced_not_duplicated(home: Path) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = {"type": "command", "command": "memq hook claude-code"}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [old]}]}}))
    memq("install", "claude-code")
    assert _claude_hooks(home)["Stop"] == [
        {"type": "command", "command": f"{console_script()} hook claude-code"}
    ]


def test_codex_install_prints_the_trust_step_and_forges_no_trust(home: Path) -> None:
    result = memq("install", "codex")
    assert 'open `codex` once and choose "Trust all and continue"' in result.stdout
    assert "trusted_hash" not in (home / ".codex/config.toml").read_text()
    assert "Trust all" not in memq("install", "codex").stdout  # nothing changed: nothing to trust


def test_the_agents_own_config_dirs_are_honoured(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    assert memq("install", "codex").exit_code == 0
    assert memq("install", "claude-code").exit_code == 0
    assert snapshot(home) == {}
    assert (tmp_path / "codex-home" / "hooks.json").is_file()
    assert (tmp_path / "claude-config" / ".claude.json").is_file()
    assert (tmp_path / "claude-config" / "settings.json").is_file()
