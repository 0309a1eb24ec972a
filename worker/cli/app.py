"""The `memq` command line: thin; parses arguments, loads settings, calls the worker modules."""

from __future__ import annotations

import typer

from worker.cli.commands import agent as agent_command
from worker.cli.commands import dlq, mcp, modes, prompt, publish, read, spool
from worker.cli.commands import install as install_command
from worker.cli.commands import redis as redis_command
from worker.cli.commands import reindex as reindex_command
from worker.cli.commands import search as search_command
from worker.cli.commands import telegram as telegram_command
from worker.cli.commands import ui as ui_command
from worker.cli.commands import worker as worker_command
from worker.cli.exits import ExitCodeGroup
from worker.ingest import hook

app = typer.Typer(
    name="memq",
    cls=ExitCodeGroup,
    help="Turn AI coding agents' tool calls into structured, searchable memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each command module adds its commands with register(app); keep one line per module.
search_command.register(app)
reindex_command.register(app)
ui_command.register(app)
telegram_command.register(app)
publish.register(app)
hook.register(app)
redis_command.register(app)
spool.register(app)
prompt.register(app)
modes.register(app)
worker_command.register(app)
read.register(app)
dlq.register(app)
mcp.register(app)
agent_command.register(app)
install_command.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
