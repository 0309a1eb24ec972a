"""`memq agent`: take Claude Code's HTTP hook requests on loopback and publish their events."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add `memq agent`."""
    app.command("agent")(agent)


def agent(
    host: Annotated[
        str | None, typer.Option("--host", help="Address to listen on (default MEMQ_AGENT_HOST).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", min=0, max=65535, help="Port (default MEMQ_AGENT_PORT)."),
    ] = None,
) -> None:
    """Serve Claude Code's `"type": "http"` hooks: redact, publish (or spool), answer at once."""
    from worker.cli.exits import settings_with_logging

    settings = settings_with_logging()
    import uvloop

    from worker.http_serving import Listener
    from worker.ingest.agent import run_agent

    chosen_port = settings.agent_port if port is None else port
    # uvloop: the endpoint is all sockets, and its answers are what the agent waits on.
    uvloop.run(run_agent(settings, Listener(host=host or settings.agent_host, port=chosen_port)))
