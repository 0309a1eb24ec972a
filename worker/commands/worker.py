"""`memq worker`: run arq workers that turn published events into stored observations."""

from __future__ import annotations

import asyncio

import typer

from worker.settings import Settings


def register(app: typer.Typer) -> None:
    """Add `memq worker`."""
    app.command("worker")(worker)


def worker(
    concurrency: int = typer.Option(
        None, "--concurrency", min=1, help="Sessions driven at once (default MEMQ_CONCURRENCY)."
    ),
    burst: bool = typer.Option(False, "--burst", help="Stop once the queue is empty."),
) -> None:
    """Run a worker: one observer session per memory session, outcomes, storage, broadcast."""
    from worker.commands.context import exit_codes, settings_from_environment
    from worker.logs import configure_logging

    with exit_codes():
        settings = settings_from_environment()
        configure_logging(settings.log_format)
        asyncio.run(run_worker(settings, burst=burst, concurrency=concurrency))


async def run_worker(settings: Settings, *, burst: bool, concurrency: int | None) -> None:
    """Connect, check the observer configuration, then run until SIGTERM (or empty, burst)."""
    from worker.arq_pool import connect_arq
    from worker.jobs import build_worker
    from worker.observers.factory import build_observer

    # Refuse to start without an observer before touching Redis: one line says what to set.
    await build_observer(settings).aclose()
    redis = await connect_arq(settings)
    try:
        w = build_worker(settings, redis, burst=burst, concurrency=concurrency)
        try:
            await w.main()
        finally:
            await w.close()
    finally:
        await redis.aclose()
