"""`memq install|uninstall <agent>` in a temp HOME, through typer's runner, for each agent."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.support.agent_settings import (
    AGENTS,
    assert_memq_installed,
    contains,
    memq,
    read_settings,
    snapshot,
    temp_home,
    write_user_files,
)


@pytest.fixture(name="home")
def _fix_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return temp_home(tmp_path, monkeypatch)


@pytest.mark.parametrize("agent", AGENTS)
def test_fresh_install_writes_hooks_and_server_with_the_full_memq_path(
    home: Path, agent: str
) -> None:
    result = memq("install", agent)
    assert result.exit_code == 0, result.output
    assert_memq_installed(home, agent)
    assert "created ~/" in result.stdout
    assert not [name for name in snapshot(home) if ".memq-backup-" in name]  # nothing to back up


@pytest.mark.parametrize("agent", AGENTS)
def test_install_keeps_the_users_content_and_uninstall_restores_it(home: Path, agent: str) -> None:
    user = write_user_files(home, agent)
    assert memq("install", agent).exit_code == 0
    assert_memq_installed(home, agent)
    for rel, text in user.items():
        if not rel.endswith(".js"):
            original = tomllib.loads(text) if rel.endswith(".toml") else json.loads(text)
            assert contains(read_settings(home / rel), original), rel
    result = memq("uninstall", agent)
    assert result.exit_code == 0, result.output
    after = snapshot(home)
    for rel, text in user.items():
        assert after[rel].decode() == text, rel  # byte for byte: layout and comments kept
    assert not [name for name in after if ".memq-backup-" not in name and name not in user]
    assert (
        memq("uninstall", agent).stdout == f"memq is not installed for {agent}: nothing changed\n"
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_a_second_install_changes_nothing_and_says_so(home: Path, agent: str) -> None:
    write_user_files(home, agent)
    assert memq("install", agent).exit_code == 0
    before = snapshot(home)
    result = memq("install", agent)
    assert (result.exit_code, result.stdout) == (
        0,
        f"memq is already installed for {agent}: nothing changed\n",
    )
    assert snapshot(home) == before


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_dry_run_prints_the_changes_and_writes_nothing(
    home: Path, agent: str, command: str
) -> None:
    write_user_files(home, agent)
    if command == "uninstall":
        memq("install", agent)
    before = snapshot(home)
    result = memq(command, agent, "--dry-run")
    assert result.exit_code == 0, result.output
    assert snapshot(home) == before
    assert "would " in result.stdout
    assert result.stdout.endswith("dry run: nothing was written\n")


@pytest.mark.parametrize("agent", AGENTS)
def test_each_changed_file_is_backed_up_first(home: Path, agent: str) -> None:
    user = write_user_files(home, agent)
    memq("install", agent)
    files = snapshot(home)
    for rel, text in user.items():
        backups = [name for name in files if name.startswith(f"{rel}.memq-backup-")]
        if rel.endswith("mine.js"):
            assert backups == []  # not memq's file: never touched
        else:
            assert len(backups) == 1, rel
            assert files[backups[0]].decode() == text


@pytest.mark.parametrize(
    ("agent", "rel", "text"),
    [
        ("claude-code", ".claude/settings.json", '{"hooks": {'),
        ("claude-code", ".claude.json", "[]"),
        ("codex", ".codex/config.toml", "model = = 1\n"),
        ("codex", ".codex/hooks.json", '{"hooks": []}'),
        ("gemini", ".gemini/settings.json", "// a comment\n{}"),
        ("opencode", ".config/opencode/opencode.json", '{"mcp": "no"}'),
    ],
)
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_a_broken_settings_file_is_refused_and_nothing_written(
    home: Path, agent: str, rel: str, text: str, command: str
) -> None:
    (home / rel).parent.mkdir(parents=True, exist_ok=True)
    (home / rel).write_text(text)
    before = snapshot(home)
    result = memq(command, agent)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"memq: cannot edit ~/{rel}: ")
    assert result.stderr.endswith("; nothing was written\n")
    assert result.stderr.count("\n") == 1
    assert snapshot(home) == before


def test_an_unknown_agent_is_a_usage_error_listing_the_four(home: Path) -> None:
    result = memq("install", "cursor")
    assert result.exit_code == 2
    assert all(f"'{agent}'" in result.stderr for agent in AGENTS)
    assert snapshot(home) == {}


@pytest.mark.parametrize(("args", "reason"), [
    (["install", "codex", "--project"], "codex reads hooks.json only from ~/.codex"),
    (["uninstall", "codex", "--project"], "codex reads hooks.json only from ~/.codex"),
    (["install", "gemini", "--http"], "--http is for claude-code only"),
])  # fmt: skip
def test_installs_an_agent_lacks_are_refused_in_one_line(
    home: Path, args: list[str], reason: str
) -> None:
    result = memq(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"memq: {reason}")
    assert result.stderr.count("\n") == 1
    assert snapshot(home) == {}
