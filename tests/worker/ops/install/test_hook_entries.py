"""memq's handlers in a `hooks` object: added once, replaced in place, removed alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from worker.ops.install.hook_entries import (
    HookSpec,
    ShapeError,
    command_line,
    install_hooks,
    is_memq_handler,
    uninstall_hooks,
)

MEMQ = "/opt/memq venv/bin/memq"
HANDLER = {"type": "command", "command": command_line(MEMQ, "claude-code")}
SPECS = [HookSpec("PostToolUse", HANDLER, "*"), HookSpec("Stop", HANDLER)]
USER_GROUP = {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo mine"}]}


def _user_settings() -> dict[str, Any]:
    return {
        "model": "opus",
        "hooks": {
            "PostToolUse": [copy.deepcopy(USER_GROUP)],
            "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
        },
    }


def test_the_command_quotes_a_memq_path_with_spaces() -> None:
    assert HANDLER["command"] == "'/opt/memq venv/bin/memq' hook claude-code"
    assert is_memq_handler(HANDLER, "claude-code")


@pytest.mark.parametrize(
    ("handler", "agent", "expected"),
    [
        ({"type": "command", "command": "memq hook claude-code"}, "claude-code", True),
        ({"type": "command", "command": "/x/bin/memq hook gemini"}, "gemini", True),
        ({"type": "command", "command": "/x/bin/memq hook gemini"}, "codex", False),
        ({"type": "command", "command": "memq hook claude-code --x"}, "claude-code", False),
        ({"type": "command", "command": "notmemq hook claude-code"}, "claude-code", False),
        ({"type": "command", "command": "echo 'unclosed"}, "claude-code", False),
        ({"type": "http", "url": "http://127.0.0.1:8766/hooks/claude-code"}, "claude-code", True),
        ({"type": "http", "url": "http://127.0.0.1:8766/other"}, "claude-code", False),
        ("memq hook claude-code", "claude-code", False),
    ],
)
def test_memq_handlers_are_recognised_by_what_they_run(
    handler: object, agent: str, expected: bool
) -> None:
    assert is_memq_handler(handler, agent) is expected


def test_install_adds_memq_groups_and_keeps_the_users() -> None:
    settings = _user_settings()
    installed = install_hooks(settings, SPECS, "claude-code")
    assert installed["model"] == "opus"
    assert installed["hooks"]["PostToolUse"] == [USER_GROUP, SPECS[0].group()]
    assert installed["hooks"]["Stop"] == [{"hooks": [HANDLER]}]
    assert installed["hooks"]["Notification"] == settings["hooks"]["Notification"]
    assert settings == _user_settings()  # the input is not changed


def test_a_second_install_changes_nothing() -> None:
    once = install_hooks(_user_settings(), SPECS, "claude-code")
    assert install_hooks(once, SPECS, "claude-code") == once


def test_install_replaces_an_older_memq_handler_instead_of_adding_a_second() -> None:
    old = {"type": "command", "command": "memq hook claude-code"}
    settings = {"hooks": {"Stop": [{"hooks": [old, {"type": "command", "command": "mine"}]}]}}
    installed = install_hooks(settings, SPECS, "claude-code")
    assert installed["hooks"]["Stop"] == [
        {"hooks": [{"type": "command", "command": "mine"}]},
        {"hooks": [HANDLER]},
    ]


def test_install_drops_memq_handlers_from_events_it_no_longer_uses() -> None:
    stale = {"hooks": {"BeforeModel": [{"hooks": [HANDLER]}]}}
    installed = install_hooks(stale, SPECS, "claude-code")
    assert "BeforeModel" not in installed["hooks"]


def test_uninstall_restores_the_users_settings() -> None:
    installed = install_hooks(_user_settings(), SPECS, "claude-code")
    assert uninstall_hooks(installed, "claude-code") == _user_settings()


def test_uninstall_removes_hooks_that_held_only_memq() -> None:
    installed = install_hooks({"model": "opus"}, SPECS, "claude-code")
    assert uninstall_hooks(installed, "claude-code") == {"model": "opus"}
    assert uninstall_hooks({"model": "opus"}, "claude-code") == {"model": "opus"}


def test_uninstall_keeps_the_users_empty_lists() -> None:
    settings = {"hooks": {"Stop": []}}
    assert uninstall_hooks(settings, "claude-code") == settings


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"hooks": []}, "`hooks` is not an object"),
        ({"hooks": {"Stop": {"hooks": []}}}, "`hooks.Stop` is not a list"),
    ],
)
def test_a_wrong_shape_is_refused_with_its_key(settings: dict[str, Any], reason: str) -> None:
    with pytest.raises(ShapeError, match=reason):
        install_hooks(settings, SPECS, "claude-code")
    with pytest.raises(ShapeError, match=reason):
        uninstall_hooks(settings, "claude-code")
