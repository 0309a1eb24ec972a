"""`memq mcp`: serve memq's search to an agent over the Model Context Protocol (stdio)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add `memq mcp`."""
    app.command("mcp")(mcp)


def mcp() -> None:
    """Serve search, get_observations, timeline and context as MCP tools on stdin/stdout."""
    from worker.cli.exits import settings_with_logging

    settings = settings_with_logging()  # logs on stderr: stdout is the protocol's channel
    from worker.cli.mcp_server import build_server

    build_server(settings).run("stdio")
