"""`memq worker`: run arq workers that turn published events into stored observations."""

from __future__ import annotations

import asyncio

import typer

from worker.settings import Settings


def register(app: typer.Typer) -> None:
    """Add `memq worker` and `memq up`."""
    app.command("worker")(worker)
    app.command("up")(up)


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
            # async_run, not main(): arq's signal handler stops the worker by cancelling
            # the main task it keeps, and main() alone leaves none (SIGTERM never exited).
            await w.async_run()
        except asyncio.CancelledError:
            pass  # the shutdown a signal asked for
        finally:
            await w.close()
    finally:
        await redis.aclose()


def up() -> None:
    """Everything on one machine with embedded defaults: managed redis-server, SQLite, a worker.

    The live web UI joins here once it exists (see the README's limits).
    """
    import sys

    from worker.commands.context import exit_codes, settings_from_environment
    from worker.logs import configure_logging

    with exit_codes():
        settings = settings_from_environment()
        configure_logging(settings.log_format)
        where = settings.redis_url or f"managed redis-server in {settings.data_path / 'redis'}"
        print(f"memq: data in {settings.data_path}; Redis: {where}", file=sys.stderr)
        asyncio.run(run_worker(settings, burst=False, concurrency=None))
