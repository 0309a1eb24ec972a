"""The `memq` console script: a fast path for the agent hook, else the full typer CLI."""

from __future__ import annotations

import sys


def main() -> None:
    """Dispatch before importing typer: the hook runs on every tool call of the agent."""
    if sys.argv[1:] == ["hook", "claude-code"]:
        # Skips typer and every command module (~0.1 s of imports per tool call).
        from worker.commands.hook import main_fast

        sys.exit(main_fast())
    from worker.cli import main as cli_main

    cli_main()
