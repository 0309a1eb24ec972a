"""Carrying out a plan (a backup of each file first, each write atomic) and reporting it."""

from __future__ import annotations

import difflib
import os
import shutil
from datetime import datetime
from pathlib import Path

from worker.ops.install.model import Edit, InstallError, Plan, display_path

_DIFF_CONTEXT = 1


def apply_plan(plan: Plan, now: datetime) -> dict[Path, Path]:
    """Write the plan's edits; returns each changed file's backup (files that existed only)."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    backups: dict[Path, Path] = {}
    for edit in plan.edits:
        try:
            if _current(edit.path) != edit.before:
                raise InstallError(
                    f"{edit.path} changed while memq was planning its edit (the agent running?):"
                    " run the command again"
                )
            if edit.before is not None:
                backups[edit.path] = _back_up(edit.path, edit.before, stamp)
            if edit.after is not None:
                _write(edit.path, edit.after)
            elif edit.path.is_symlink() and edit.show_diff:
                # A settings file kept elsewhere (dotfiles): emptied through the link, kept.
                _write(edit.path, b"{}\n" if edit.path.suffix == ".json" else b"")
            else:
                edit.path.unlink(missing_ok=True)
        except OSError as e:
            raise InstallError(f"cannot write {edit.path} ({e.strerror})") from e
    return backups


def describe_plan(
    plan: Plan, home: Path, backups: dict[Path, Path] | None = None, *, dry_run: bool = False
) -> list[str]:
    """The report's lines: each file with its diff (or what happened to it), then the notes."""
    if not plan.edits:
        state = "already installed" if plan.action == "install" else "not installed"
        return [f"memq is {state} for {plan.agent}: nothing changed"]
    lines: list[str] = []
    for edit in plan.edits:
        line = f"{_verb(edit, dry_run)} {display_path(edit.path, home)}"
        backup = (backups or {}).get(edit.path)
        if backup is not None:
            line += f" (backup: {display_path(backup, home)})"
        lines.append(line)
        if edit.changes:
            lines += [f"  {change}" for change in edit.changes]
        elif edit.show_diff:
            lines += [f"  {diff_line}" for diff_line in _diff(edit)]
    lines += plan.notes
    if dry_run:
        lines.append("dry run: nothing was written")
    return lines


def _verb(edit: Edit, dry_run: bool) -> str:
    if edit.before is None:
        return "would create" if dry_run else "created"
    if edit.after is None:
        return "would delete" if dry_run else "deleted"
    return "would update" if dry_run else "updated"


def _diff(edit: Edit) -> list[str]:
    before = (edit.before or b"").decode(errors="replace").splitlines()
    after = (edit.after or b"").decode(errors="replace").splitlines()
    diff = difflib.unified_diff(before, after, n=_DIFF_CONTEXT, lineterm="")
    return [line for line in diff if not line.startswith(("---", "+++"))]


def _current(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _back_up(path: Path, content: bytes, stamp: str) -> Path:
    backup = path.with_name(f"{path.name}.memq-backup-{stamp}")
    count = 1
    while backup.exists():
        count += 1
        backup = path.with_name(f"{path.name}.memq-backup-{stamp}-{count}")
    backup.write_bytes(content)
    shutil.copymode(path, backup)
    return backup


def _write(path: Path, content: bytes) -> None:
    path = path.resolve() if path.is_symlink() else path  # the link stays; its file changes
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.memq-writing")
    temporary.write_bytes(content)
    if path.exists():
        shutil.copymode(path, temporary)
    os.replace(temporary, path)
