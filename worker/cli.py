"""The `memq` command line: thin; parses arguments, loads settings, calls the worker modules."""

from __future__ import annotations

import typer

from worker.commands import modes, prompt

app = typer.Typer(
    name="memq",
    help="Turn AI coding agents' tool calls into structured, searchable memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each command module adds its commands with register(app); keep one line per module.
prompt.register(app)
modes.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
