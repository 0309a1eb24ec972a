"""Command groups (`memq dlq …`, `memq modes …`): one typer sub-app, added the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import typer


def add_group(
    app: typer.Typer, name: str, help_text: str, commands: Mapping[str, Callable[..., Any]]
) -> None:
    """Add `memq <name> <command>` for each command, in order; `memq <name>` alone shows help."""
    group = typer.Typer(name=name, help=help_text, no_args_is_help=True)
    for command_name, command in commands.items():
        group.command(command_name)(command)
    app.add_typer(group)
