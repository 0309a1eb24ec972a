"""Where each agent's settings live (HOME, the agents' variables, a project); memq's hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.ops.install.layouts import agent_files, hook_specs
from worker.ops.install.model import HttpHooks, Target, UnsupportedInstallError

HOME = Path("/home/dev")
PROJECT = Path("/home/dev/webapp")
MEMQ = "/opt/memq/bin/memq"


def _paths(agent: str, **target: object) -> list[Path]:
    return [f.path for f in agent_files(agent, Target(memq=MEMQ, home=HOME, **target))]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("agent", "user", "project"),
    [
        (
            "claude-code",
            [".claude/settings.json", ".claude.json"],
            [".claude/settings.json", ".mcp.json"],
        ),
        ("gemini", [".gemini/settings.json"], [".gemini/settings.json"]),
        (
            "opencode",
            [".config/opencode/plugin/memq.js", ".config/opencode/opencode.json"],
            [".opencode/plugin/memq.js", ".opencode/opencode.json"],
        ),
        ("codex", [".codex/hooks.json", ".codex/config.toml"], None),
    ],
)
def test_user_and_project_files(agent: str, user: list[str], project: list[str] | None) -> None:
    assert _paths(agent) == [HOME / p for p in user]
    if project is None:
        with pytest.raises(UnsupportedInstallError, match="without --project"):
            _paths(agent, project=PROJECT)
    else:
        assert _paths(agent, project=PROJECT) == [PROJECT / p for p in project]


def test_the_agents_own_variables_move_their_user_files() -> None:
    environ = {
        "CLAUDE_CONFIG_DIR": "/cfg/claude",
        "CODEX_HOME": "/cfg/codex",
        "XDG_CONFIG_HOME": "/xdg",
    }
    assert _paths("claude-code", environ=environ) == [
        Path("/cfg/claude/settings.json"),
        Path("/cfg/claude/.claude.json"),
    ]
    assert _paths("codex", environ=environ) == [
        Path("/cfg/codex/hooks.json"),
        Path("/cfg/codex/config.toml"),
    ]
    assert _paths("opencode", environ=environ)[1] == Path("/xdg/opencode/opencode.json")


@pytest.mark.parametrize(
    ("agent", "events"),
    [
        (
            "claude-code",
            [
                "SessionStart",
                "UserPromptSubmit",
                "PostToolUse",
                "PostToolUseFailure",
                "Stop",
                "SessionEnd",
            ],
        ),
        ("codex", ["SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"]),
        ("gemini", ["SessionStart", "BeforeAgent", "AfterTool", "AfterAgent", "SessionEnd"]),
    ],
)
def test_each_agent_gets_its_events_with_the_full_memq_path(agent: str, events: list[str]) -> None:
    specs = hook_specs(agent, Target(memq=MEMQ, home=HOME))
    assert [s.event for s in specs] == events
    assert {s.handler["command"] for s in specs} == {f"{MEMQ} hook {agent}"}
    tool_event = {"claude-code": "PostToolUse", "codex": "PostToolUse", "gemini": "AfterTool"}[
        agent
    ]
    assert {s.event for s in specs if s.matcher == "*"} >= {tool_event}


def test_timeouts_are_in_each_agents_unit() -> None:
    codex = hook_specs("codex", Target(memq=MEMQ, home=HOME))
    gemini = hook_specs("gemini", Target(memq=MEMQ, home=HOME))
    assert {s.handler["timeout"] for s in codex} == {3}  # seconds
    assert {(s.handler["timeout"], s.handler["name"]) for s in gemini} == {(5000, "memq")}  # ms


@pytest.mark.parametrize("token", [False, True])
def test_http_hooks_keep_session_start_a_command(token: bool) -> None:
    http = HttpHooks(url="http://127.0.0.1:9999/hooks/claude-code", token=token)
    specs = {
        s.event: s.handler
        for s in hook_specs("claude-code", Target(memq=MEMQ, home=HOME, http=http))
    }
    assert specs.pop("SessionStart") == {"type": "command", "command": f"{MEMQ} hook claude-code"}
    for handler in specs.values():
        assert (handler["type"], handler["url"], handler["timeout"]) == ("http", http.url, 5)
        assert ("headers" in handler) is token
        if token:
            assert handler["headers"] == {"Authorization": "Bearer $MEMQ_AGENT_TOKEN"}
            assert handler["allowedEnvVars"] == ["MEMQ_AGENT_TOKEN"]


@pytest.mark.parametrize("agent", ["codex", "gemini", "opencode"])
def test_http_is_refused_for_other_agents(agent: str) -> None:
    http = HttpHooks(url="http://127.0.0.1:8766/hooks/claude-code")
    with pytest.raises(UnsupportedInstallError, match="claude-code only"):
        _paths(agent, http=http)
