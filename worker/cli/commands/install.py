"""`memq install|uninstall <agent>`: memq's hooks and MCP server in the agent's settings."""

from __future__ import annotations

import enum
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from worker.cli.exits import BadInputError
from worker.errors import WorkerError

if TYPE_CHECKING:
    from collections.abc import Callable

    from worker.ops.install import HttpHooks, Plan, Target


class AgentName(enum.StrEnum):
    """The agents memq installs into (worker.ops.install.AGENTS)."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    GEMINI = "gemini"
    OPENCODE = "opencode"


_Agent = Annotated[AgentName, typer.Argument(metavar="AGENT", help="The coding agent.")]
_Project = Annotated[
    bool,
    typer.Option("--project", help="Write this directory's project settings, not the user's."),
]
_DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the changes; write nothing.")]


def register(app: typer.Typer) -> None:
    """Add `memq install` and `memq uninstall`."""
    app.command("install")(install)
    app.command("uninstall")(uninstall)


def install(
    agent: _Agent,
    project: _Project = False,
    dry_run: _DryRun = False,
    http: Annotated[
        bool,
        typer.Option(
            "--http", help="claude-code: HTTP hooks to `memq agent` (SessionStart stays a command)."
        ),
    ] = False,
) -> None:
    """Add memq's hooks and MCP server to the agent's settings (idempotent, with a backup)."""
    from worker.ops.install import plan_install

    target = _target(project)
    if http:
        target = msgspec.structs.replace(target, http=_http_hooks())
    _run(plan_install, agent.value, target, dry_run)


def uninstall(agent: _Agent, project: _Project = False, dry_run: _DryRun = False) -> None:
    """Remove what `memq install` added, and nothing else (idempotent, with a backup)."""
    from worker.ops.install import plan_uninstall

    _run(plan_uninstall, agent.value, _target(project), dry_run)


def _run(planner: Callable[[str, Target], Plan], agent: str, target: Target, dry_run: bool) -> None:
    from worker.ops.install import UnsupportedInstallError, apply_plan, describe_plan

    try:
        plan = planner(agent, target)
    except UnsupportedInstallError as e:
        raise BadInputError(str(e)) from e
    backups = None if dry_run else apply_plan(plan, datetime.now(UTC))
    for line in describe_plan(plan, target.home, backups, dry_run=dry_run):
        print(line)


def _target(project: bool) -> Target:
    from worker.ops.install import Target

    environ = {
        name: value
        for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME")
        if (value := os.environ.get(name))
    }
    return Target(
        memq=_memq_path(),
        home=Path.home(),
        project=Path.cwd() if project else None,
        environ=environ,
    )


def _http_hooks() -> HttpHooks:
    """Where `memq agent` listens (MEMQ_AGENT_HOST/PORT), and whether it wants the token."""
    from worker.cli.exits import settings_from_environment
    from worker.ops.install import HttpHooks

    settings = settings_from_environment()
    host = settings.agent_host
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"  # listening everywhere: the agent on this machine calls loopback
    if ":" in host:
        host = f"[{host}]"
    url = f"http://{host}:{settings.agent_port}/hooks/claude-code"
    return HttpHooks(url=url, token=settings.agent_token is not None)


def _memq_path() -> str:
    """The memq console script beside this Python (the agents' PATH may not have it)."""
    found = shutil.which("memq", path=str(Path(sys.executable).parent)) or shutil.which("memq")
    if found is None:
        raise WorkerError("cannot find the memq console script next to this Python or on PATH")
    return str(Path(found).absolute())
