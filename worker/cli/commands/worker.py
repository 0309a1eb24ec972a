"""`memq worker`: run arq workers that turn published events into stored observations."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

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
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", min=0, max=65535, help="Serve /metrics, /healthz, /readyz here."
    ),
    metrics_host: str = typer.Option(
        "127.0.0.1", "--metrics-host", help="Address for --metrics-port (0.0.0.0 in containers)."
    ),
    processes: int = typer.Option(
        1,
        "--processes",
        min=1,
        help="Worker processes under a supervisor that restarts a crashed one; "
        "process i serves metrics on --metrics-port + i.",
    ),
    supervisor_pid: int | None = typer.Option(None, "--supervisor-pid", hidden=True),
) -> None:
    """Run a worker: one observer session per memory session, outcomes, storage, broadcast."""
    from worker.cli.exits import settings_with_logging

    settings = settings_with_logging()
    if processes > 1:
        supervise(
            settings,
            processes,
            burst=burst,
            concurrency=concurrency,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
        return
    asyncio.run(
        run_worker(
            settings,
            burst=burst,
            concurrency=concurrency,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            supervisor_pid=supervisor_pid,
        )
    )


async def run_worker(
    settings: Settings,
    *,
    burst: bool,
    concurrency: int | None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    supervisor_pid: int | None = None,
) -> None:
    """Connect, check the observer configuration, then run until SIGTERM (or empty, burst);
    with a metrics port, the health server runs beside the worker; under a supervisor, it
    stops itself once the supervisor is gone."""
    from worker.observers.factory import build_observer
    from worker.queue.arq_pool import connect_arq
    from worker.sessions.jobs import build_worker

    # Refuse to start without an observer before touching Redis: one line says what to set.
    await build_observer(settings).aclose()
    redis = await connect_arq(settings)
    try:
        async with contextlib.AsyncExitStack() as stack:
            metrics = None
            if metrics_port is not None:
                from worker.ops.health import serve_health
                from worker.telemetry.metrics import Metrics

                metrics = Metrics()
                await stack.enter_async_context(
                    serve_health(settings, redis, metrics, host=metrics_host, port=metrics_port)
                )
            w = build_worker(settings, redis, burst=burst, concurrency=concurrency, metrics=metrics)
            if supervisor_pid is not None:  # after build_worker: its SIGTERM handler is set
                from worker.ops.supervisor import stop_when_orphaned

                watch = asyncio.create_task(stop_when_orphaned(supervisor_pid))
                stack.callback(watch.cancel)
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


STOP_MARGIN_S = 15.0
"""How much longer than the job timeout a stopping worker process may take before SIGKILL."""


def supervise(
    settings: Settings,
    processes: int,
    *,
    burst: bool,
    concurrency: int | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run `processes` copies of `memq worker --processes 1` until SIGTERM/SIGINT."""
    from worker.cli.exits import BadInputError
    from worker.observers.factory import build_observer
    from worker.ops.supervisor import Supervisor

    if metrics_port and metrics_port + processes - 1 > 65535:
        raise BadInputError(f"--metrics-port {metrics_port} + {processes} processes passes 65535")

    # The children would refuse to start, over and over: refuse once, here, with one line.
    asyncio.run(build_observer(settings).aclose())
    commands = []
    for i in range(processes):
        # A fresh interpreter per child: nothing of this process (loop, sockets) is inherited.
        # -P: the working directory is not put on sys.path (a ./worker there would shadow us).
        command = [sys.executable, "-P", "-m", "worker.cli", "worker", "--processes", "1",
                   "--supervisor-pid", str(os.getpid())]  # fmt: skip
        if concurrency is not None:
            command += ["--concurrency", str(concurrency)]
        if burst:
            command.append("--burst")
        if metrics_port is not None:
            port = metrics_port + i if metrics_port else 0  # 0: each picks a free port
            command += ["--metrics-port", str(port), "--metrics-host", metrics_host]
        commands.append(command)
    Supervisor(
        commands, stop_timeout_s=settings.job_timeout_s + STOP_MARGIN_S, done_on_success=burst
    ).run()


def up() -> None:
    """Everything on one machine with embedded defaults: managed redis-server, SQLite, a worker,
    the web UI on MEMQ_UI_HOST:MEMQ_UI_PORT and the HTTP hook endpoint on MEMQ_AGENT_PORT.
    """
    import logging

    from worker.cli.exits import settings_with_logging
    from worker.errors import WorkerError
    from worker.fanout.ui.app import check_bind
    from worker.http_serving import Listener
    from worker.masked_url import describe_url

    async def worker_and_ui(settings: Settings) -> None:
        from worker.fanout.ui.server import run_ui

        stop = asyncio.Event()

        async def ui() -> None:
            try:
                await run_ui(
                    settings, Listener(host=settings.ui_host, port=settings.ui_port, stop=stop)
                )
            except WorkerError as e:  # the UI failing never stops storage (DESIGN invariant 6)
                logging.getLogger(__name__).error("web UI not running: %s", e)

        async def agent() -> None:
            from worker.ingest.agent import run_agent

            try:
                await run_agent(
                    settings,
                    Listener(host=settings.agent_host, port=settings.agent_port, stop=stop),
                )
            except WorkerError as e:  # hooks fall back to the command hook's path
                logging.getLogger(__name__).error("HTTP hook endpoint not running: %s", e)

        side_tasks = [asyncio.create_task(ui()), asyncio.create_task(agent())]
        try:
            await run_worker(settings, burst=False, concurrency=None)
        finally:
            stop.set()
            await asyncio.gather(*side_tasks)

    settings = settings_with_logging()
    if settings.observer_provider is None:
        from worker.observers.factory import with_default_observer

        settings, chosen = asyncio.run(with_default_observer(settings, os.environ))
        print(chosen, file=sys.stderr)
    check_bind(settings.ui_host, settings.ui_token.reveal() if settings.ui_token else None)
    from worker.ingest.agent import check_agent_bind

    check_agent_bind(
        settings.agent_host, settings.agent_token.reveal() if settings.agent_token else None
    )
    where = (
        describe_url(settings.redis_url)  # never its password in a terminal or a log
        if settings.redis_url
        else f"managed redis-server in {settings.data_path / 'redis'}"
    )
    print(f"memq: data in {settings.data_path}; Redis: {where}", file=sys.stderr)
    asyncio.run(worker_and_ui(settings))
