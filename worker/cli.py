"""The `memq` command line: thin; parses arguments, loads settings, calls the worker modules."""

from __future__ import annotations

import sys

if sys.argv[1:] == ["hook", "claude-code"]:
    # Runs on every tool call of the agent: skip typer and the command modules (~0.1 s).
    from worker.commands.hook import main_fast

    sys.exit(main_fast())

import typer

from worker.commands import dlq, hook, modes, prompt, publish, read, spool
from worker.commands import redis as redis_command
from worker.commands import worker as worker_command

app = typer.Typer(
    name="memq",
    help="Turn AI coding agents' tool calls into structured, searchable memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each command module adds its commands with register(app); keep one line per module.
publish.register(app)
hook.register(app)
redis_command.register(app)
spool.register(app)
prompt.register(app)
modes.register(app)
worker_command.register(app)
read.register(app)
dlq.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
