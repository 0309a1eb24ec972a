"""Planning an install or uninstall: read each of the agent's files, compute what it becomes.

Nothing is written here; a plan with no edits means memq is already (un)installed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from worker.ops.install.hook_entries import ShapeError
from worker.ops.install.json_settings import changed_keys, parse_object, render_object
from worker.ops.install.layouts import AgentFile, CopiedFile, JsonFile, TomlFile, agent_files
from worker.ops.install.model import Action, Edit, InstallError, Plan, Target, display_path

CODEX_TRUST_STEP = (
    'Codex runs new or changed hooks only once trusted: open `codex` once and choose "Trust all'
    ' and continue" (memq never writes the trust entries itself).'
)
GEMINI_TRUST_NOTE = "Gemini starts MCP servers only in folders you trust."
CLAUDE_PROJECT_NOTE = "Claude Code asks once before it starts the servers of a project's .mcp.json."
HTTP_NOTE = (
    "The HTTP hooks need `memq agent` running (`memq up`, or deploy/systemd/memq-agent.service);"
    " SessionStart stays a command hook."
)


def plan_install(agent: str, target: Target) -> Plan:
    """What `memq install <agent>` changes; InstallError when a file cannot be edited safely."""
    edits = _edits(agent, target, "install")
    notes: list[str] = []
    if agent == "codex" and any(edit.path.name == "hooks.json" for edit in edits):
        notes.append(CODEX_TRUST_STEP)
    if agent == "gemini" and edits:
        notes.append(GEMINI_TRUST_NOTE)
    if any(edit.path.name == ".mcp.json" for edit in edits):
        notes.append(CLAUDE_PROJECT_NOTE)
    if target.http is not None and edits:
        notes.append(HTTP_NOTE)
    return Plan(agent=agent, action="install", edits=edits, notes=tuple(notes))


def plan_uninstall(agent: str, target: Target) -> Plan:
    """What `memq uninstall <agent>` changes: memq's entries out, everything else as it was."""
    return Plan(agent=agent, action="uninstall", edits=_edits(agent, target, "uninstall"))


def _edits(agent: str, target: Target, action: Action) -> tuple[Edit, ...]:
    edits = (_edit(file, action, target.home) for file in agent_files(agent, target))
    return tuple(edit for edit in edits if edit is not None)


def _edit(file: AgentFile, action: Action, home: Path) -> Edit | None:
    before = _read(file.path, home)
    if isinstance(file, CopiedFile):
        return _copy_edit(file, before, action, home)
    try:
        if isinstance(file, JsonFile):
            return _json_edit(file, before, action)
        after = _toml_after(file, before, action)
    except ShapeError as e:
        raise InstallError(
            f"cannot edit {display_path(file.path, home)}: {e}; nothing was written"
        ) from e
    if after == before:
        return None
    return Edit(path=file.path, before=before, after=after)


def _json_edit(file: JsonFile, before: bytes | None, action: Action) -> Edit | None:
    settings = parse_object(before)
    changed = file.install(settings) if action == "install" else file.uninstall(settings)
    if changed == settings:
        return None
    # A file left holding only `{}` held only memq's entries: no file reads as empty settings.
    after = None if action == "uninstall" and not changed else render_object(changed, before)
    changes = tuple(changed_keys(settings, changed))
    return Edit(path=file.path, before=before, after=after, changes=changes)


def _toml_after(file: TomlFile, before: bytes | None, action: Action) -> bytes | None:
    try:
        text = (before or b"").decode()
    except UnicodeDecodeError as e:
        raise ShapeError(f"not valid TOML ({e})") from e
    changed = file.install(text) if action == "install" else file.uninstall(text)
    if changed == text:
        return before
    if action == "uninstall" and not changed.strip():
        return None
    try:
        tomllib.loads(changed)  # what is written must read back
    except tomllib.TOMLDecodeError as e:
        raise ShapeError(f"memq's edit would not be valid TOML ({e})") from e
    return changed.encode()


def _copy_edit(file: CopiedFile, before: bytes | None, action: Action, home: Path) -> Edit | None:
    if action == "uninstall":
        if before is None:
            return None
        return Edit(path=file.path, before=before, after=None, show_diff=False)
    if not file.source.is_file():
        raise InstallError(
            f"memq's OpenCode plugin file is missing at {file.source}; nothing was written"
        )
    source = file.source.read_bytes()
    if source == before:
        return None
    return Edit(path=file.path, before=before, after=source, show_diff=False)


def _read(path: Path, home: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise InstallError(
            f"cannot read {display_path(path, home)} ({e.strerror}); nothing was written"
        ) from e
