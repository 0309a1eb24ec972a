"""`memq ui`: serve the live web UI on loopback, or elsewhere with MEMQ_UI_TOKEN."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add `memq ui`."""
    app.command("ui")(ui)


def ui(
    host: Annotated[
        str | None, typer.Option("--host", help="Address to listen on (default MEMQ_UI_HOST).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", min=0, max=65535, help="Port (default MEMQ_UI_PORT)."),
    ] = None,
) -> None:
    """Serve the live web UI: newest observations (live), search, sessions, operator panel."""
    from worker.cli.exits import settings_with_logging

    settings = settings_with_logging()
    from worker.fanout.ui.server import run_ui
    from worker.http_serving import Listener

    chosen_port = settings.ui_port if port is None else port
    asyncio.run(run_ui(settings, Listener(host=host or settings.ui_host, port=chosen_port)))
