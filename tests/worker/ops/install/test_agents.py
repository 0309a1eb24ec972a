"""Planning reads the agent's real files and writes nothing; applying keeps a backup of each."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from worker.ops.install import (
    InstallError,
    Target,
    apply_plan,
    describe_plan,
    plan_install,
    plan_uninstall,
)

MEMQ = "/opt/memq/bin/memq"
NOW = datetime(2026, 12, 2, 1, 30, 0, tzinfo=UTC)


@pytest.fixture(name="target")
def _fix_target(tmp_path: Path) -> Target:
    return Target(memq=MEMQ, home=tmp_path)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_planning_writes_nothing(target: Target) -> None:
    plan = plan_install("gemini", target)
    assert [e.path for e in plan.edits] == [target.home / ".gemini/settings.json"]
    assert _snapshot(target.home) == {}
    assert describe_plan(plan, target.home, dry_run=True)[-1] == "dry run: nothing was written"


def test_apply_backs_up_every_file_that_existed(target: Target) -> None:
    settings = target.home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{\n    "general": {"vimMode": true}\n}\n')
    os.chmod(settings, 0o640)
    backups = apply_plan(plan_install("gemini", target), NOW)
    backup = target.home / ".gemini" / "settings.json.memq-backup-20261202T013000Z"
    assert backups == {settings: backup}
    assert backup.read_text() == '{\n    "general": {"vimMode": true}\n}\n'
    assert (backup.stat().st_mode & 0o777, settings.stat().st_mode & 0o777) == (0o640, 0o640)
    assert json.loads(settings.read_text())["general"] == {"vimMode": True}
    assert settings.read_text().startswith('{\n    "general"')  # its indentation, kept
    lines = describe_plan(plan_uninstall("gemini", target), target.home)
    assert lines[0] == "updated ~/.gemini/settings.json"


def test_a_second_backup_in_the_same_second_gets_its_own_name(target: Target) -> None:
    settings = target.home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}")
    first = apply_plan(plan_install("gemini", target), NOW)[settings]
    second = apply_plan(plan_uninstall("gemini", target), NOW)[settings]
    assert first != second
    assert second.name.endswith("-2")
    assert not settings.exists()  # it held only memq's entries


def test_nothing_to_do_says_so(target: Target) -> None:
    apply_plan(plan_install("codex", target), NOW)
    assert describe_plan(plan_install("codex", target), target.home) == [
        "memq is already installed for codex: nothing changed"
    ]
    apply_plan(plan_uninstall("codex", target), NOW)
    assert describe_plan(plan_uninstall("codex", target), target.home) == [
        "memq is not installed for codex: nothing changed"
    ]


def test_a_broken_file_stops_the_plan_before_anything_is_written(target: Target) -> None:
    (target.home / ".claude").mkdir()
    (target.home / ".claude.json").write_text("{broken")
    with pytest.raises(InstallError, match=r"cannot edit ~/\.claude\.json: not valid JSON"):
        plan_install("claude-code", target)
    assert _snapshot(target.home) == {".claude.json": b"{broken"}


def test_the_opencode_plugin_is_copied_and_removed(target: Target, tmp_path: Path) -> None:
    source = tmp_path / "plugin-source.js"
    source.write_text("export const Memq = async () => ({})\n")
    with_plugin = Target(memq=MEMQ, home=target.home / "h", plugin_source=source)
    plugin = with_plugin.home / ".config/opencode/plugin/memq.js"
    apply_plan(plan_install("opencode", with_plugin), NOW)
    assert plugin.read_bytes() == source.read_bytes()
    assert plan_install("opencode", with_plugin).edits == ()
    apply_plan(plan_uninstall("opencode", with_plugin), NOW)
    assert not plugin.exists()
    missing = Target(memq=MEMQ, home=target.home, plugin_source=tmp_path / "nope.js")
    with pytest.raises(InstallError, match="OpenCode plugin file is missing at"):
        plan_install("opencode", missing)


def test_a_symlinked_settings_file_is_changed_through_its_link(target: Target) -> None:
    dotfiles = target.home / "dotfiles" / "settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"model": "opus"}')
    link = target.home / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    apply_plan(plan_install("claude-code", target), NOW)
    assert link.is_symlink()
    assert "hooks" in json.loads(dotfiles.read_text())
    apply_plan(plan_uninstall("claude-code", target), NOW)
    assert link.is_symlink()
    assert json.loads(dotfiles.read_text()) == {"model": "opus"}
    dotfiles.write_text("{}")
    apply_plan(plan_install("claude-code", target), NOW)
    apply_plan(plan_uninstall("claude-code", target), NOW)
    assert (link.is_symlink(), dotfiles.read_text()) == (True, "{}\n")


def test_a_file_changed_after_planning_is_not_overwritten(target: Target) -> None:
    plan = plan_install("gemini", target)
    settings = target.home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"written": "meanwhile"}')
    with pytest.raises(InstallError, match="changed while memq was planning"):
        apply_plan(plan, NOW)
    assert settings.read_text() == '{"written": "meanwhile"}'
