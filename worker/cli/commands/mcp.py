"""`memq mcp`: serve memq's search to an agent over the Model Context Protocol (stdio)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add `memq mcp`."""
    app.command("mcp")(mcp)


def mcp() -> None:
    """Serve search, get_observations, timeline and context as MCP tools on stdin/stdout."""
    from worker.cli.exits import settings_from_environment
    from worker.logs import configure_logging

    settings = settings_from_environment()
    configure_logging(settings.log_format)  # stderr: stdout is the protocol's channel
    from worker.cli.mcp_server import build_server

    build_server(settings).run("stdio")
