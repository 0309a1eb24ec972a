"""`memq spool flush|status`: the events hooks spooled while Redis was unreachable."""

from __future__ import annotations

from typing import Annotated

import msgspec
import typer

from worker.cli.exits import (
    EXIT_RUNTIME,
    fail,
    settings_from_environment,
)
from worker.cli.groups import add_group
from worker.ingest.spool import FlushResult, Spool

JsonOption = Annotated[bool, typer.Option("--json", help="Print a JSON object.")]
_FLUSH_TIMEOUT_MS = 5000


def register(app: typer.Typer) -> None:
    """Add the `spool` command group to the memq app."""
    add_group(
        app,
        "spool",
        "Events waiting on disk for Redis.",
        {"flush": flush_command, "status": status_command},
    )


def flush_command(as_json: JsonOption = False) -> None:
    """Publish the spooled events in order (each exactly once), then empty the spool."""
    from worker.ingest.producer import SyncProducer

    settings = settings_from_environment()
    spool = Spool.from_settings(settings)
    if not spool.pending():
        result = None
    else:
        with SyncProducer.connect(settings, timeout_ms=_FLUSH_TIMEOUT_MS) as producer:
            result = spool.flush(producer)
        if result is None:
            raise fail("another memq process is flushing the spool; try again", EXIT_RUNTIME)
    if as_json:
        print(msgspec.json.encode(result or FlushResult()).decode())
    elif result is None:
        print("spool empty")
    else:
        print(
            f"published {result.published}, duplicates {result.duplicates}, "
            f"rejected {result.rejected}, remaining {result.remaining}"
        )
    if result is not None and result.refused:
        raise fail(result.refused, EXIT_RUNTIME)


def status_command(as_json: JsonOption = False) -> None:
    """How many events wait in the spool, and how many were dropped or rejected."""
    status = Spool.from_settings(settings_from_environment()).status()
    if as_json:
        print(msgspec.json.encode(status).decode())
        return
    print(
        f"{status.events} events ({status.bytes} of {status.max_bytes} bytes) in {status.path}; "
        f"{status.dropped} dropped when full; {status.rejected} corrupt lines rejected"
    )
