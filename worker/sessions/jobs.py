"""arq wiring: the observe_session job, the sweep cron, startup/shutdown and the Worker."""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from arq import Worker, cron
from arq.connections import ArqRedis
from arq.typing import WorkerCoroutine
from arq.worker import Function, func

from pipeline.prompting.mode_files import load_mode
from worker.keys import Keys
from worker.logs import bind_session, session_context
from worker.observers.factory import build_observer
from worker.queue.arq_worker import SHUT_DOWN, MemqWorker
from worker.queue.scheduling import JOB_FUNCTION, job_deserializer, job_serializer
from worker.redis_text import as_text
from worker.search.vector_sync import BackgroundSync, start_vector_sync
from worker.sessions.runtime import Runtime, runtime_from
from worker.sessions.session_run import REDIS_LOST, observe
from worker.settings import Settings
from worker.storage.factory import open_store
from worker.storage.protocol import StoreError

if TYPE_CHECKING:
    from worker.telemetry.metrics import Metrics

logger = logging.getLogger(__name__)

SWEEP_EVERY_S = 10
# processed_events pruning, from the sweep: each process at most this often (its first sweep
# included), so a fleet of N workers prunes N times an hour, each a cheap indexed DELETE.
PRUNE_EVERY_S = 3600.0
# How long the replay guard keeps a processed event id. It only matters for stream entries a
# crash left pending, which are retried within minutes; a week is the producer's dedupe window.
PROCESSED_RETENTION = timedelta(days=7)
PRUNED_AT = "processed_pruned_at"
"""arq ctx key: when (time.monotonic()) this process last pruned."""


async def observe_session(ctx: dict[str, Any], session_id: str) -> str:
    """Drive one session until its stream is drained (or hand off to a fresh job)."""
    with session_context(session_id):
        # A plain str: arq logs the result's repr, and it stays `'drained'`.
        return str(await observe(runtime_from(ctx), session_id, str(ctx["job_id"])))


async def sweep_sessions(ctx: dict[str, Any]) -> int:
    """Schedule a job for every session that has entries but no live job; returns how many."""
    rt = runtime_from(ctx)
    scheduled = 0
    try:
        async for raw in rt.redis.sscan_iter(rt.keys.sessions, count=500):
            session = as_text(raw)
            if await rt.scheduler.sweep(session) is not None:
                scheduled += 1
                with session_context(session):
                    logger.info("sweep scheduled a stranded session")
    except REDIS_LOST as e:
        # A failover or restart mid-sweep: the next sweep, SWEEP_EVERY_S later, goes on.
        logger.info("sweep cut off, Redis lost: %s", e)
        return scheduled
    if prune_due(ctx, time.monotonic()):
        await prune_processed_events(rt)
    return scheduled


def prune_due(ctx: dict[str, Any], now: float) -> bool:
    """True at most once every PRUNE_EVERY_S per arq ctx (one per process); records `now`."""
    last = ctx.get(PRUNED_AT)
    if isinstance(last, float) and now - last < PRUNE_EVERY_S:
        return False
    ctx[PRUNED_AT] = now
    return True


async def prune_processed_events(rt: Runtime) -> int:
    """Delete replay-guard rows older than PROCESSED_RETENTION; returns how many."""
    cutoff = datetime.now(UTC) - PROCESSED_RETENTION
    try:
        pruned = await rt.store.prune_processed(cutoff)
    except StoreError as e:
        # Sessions were swept already; a missed pruning only waits for the next one.
        logger.warning("pruning processed_events failed, next try in an hour: %s", e)
        return 0
    if pruned:
        logger.info("pruned %d processed event ids older than %s", pruned, cutoff.isoformat())
    return pruned


def consumer_name() -> str:
    """A name unique to this worker process, shown in the streams' consumer groups."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


async def build_runtime(
    settings: Settings, redis: ArqRedis, metrics: Metrics | None = None
) -> Runtime:
    """Open storage, the observer and the mode; fail fast with one line when one is wrong."""
    observer = build_observer(settings)
    if metrics is not None:
        from worker.telemetry.metrics import TimedObserver

        observer = TimedObserver(observer, metrics)
    mode = load_mode(settings.mode, extra_dirs=settings.extra_modes_dirs)
    for warning in mode.warnings:
        logger.warning("mode: %s", warning)
    store = open_store(settings)
    await store.migrate()
    rt = Runtime.build(
        settings=settings,
        redis=redis,
        store=store,
        observer=observer,
        mode=mode,
        consumer=consumer_name(),
        metrics=metrics,
    )
    # Rows a crashed worker stored but never announced.
    await rt.outbox.flush(late="startup")
    return rt


async def close_runtime(rt: Runtime) -> None:
    """Close what build_runtime opened."""
    await rt.observer.aclose()
    await rt.store.aclose()


def job_functions(settings: Settings) -> list[Function]:
    """The job list (explicit, no registry): observe_session with per-session ids."""
    coroutine: WorkerCoroutine = observe_session
    return [
        func(
            coroutine,
            name=JOB_FUNCTION,
            keep_result=0,
            timeout=settings.job_timeout_s,
            # Our own attempts count failures; arq re-runs only cancelled (SIGTERM) jobs.
            max_tries=1000,
        )
    ]


def build_worker(
    settings: Settings,
    redis: ArqRedis,
    *,
    burst: bool = False,
    concurrency: int | None = None,
    runtime: Runtime | None = None,
    with_cron: bool = True,
    metrics: Metrics | None = None,
) -> Worker:
    """An arq Worker for this tenant; pass `runtime` to skip startup/shutdown (tests)."""

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["runtime"] = await build_runtime(settings, redis, metrics)
        # Feeds Chroma from the vector queue in the background (None: MEMQ_CHROMA=off).
        ctx["vector_sync"] = start_vector_sync(settings, ctx["runtime"].store)

    async def shutdown(ctx: dict[str, Any]) -> None:
        ctx[SHUT_DOWN] = True
        if isinstance(sync := ctx.get("vector_sync"), BackgroundSync):
            await sync.stop()
        rt = ctx.get("runtime")
        if isinstance(rt, Runtime):
            await close_runtime(rt)

    keys = Keys(settings.prefix)

    async def on_job_start(ctx: dict[str, Any]) -> None:
        # arq runs this in the job's own task, before its "→ job started" line: that line,
        # every line of the job and arq's "← job ended" line carry the session id.
        session = keys.session_of_job(str(ctx["job_id"]))
        if session is not None:
            bind_session(session)

    sweep: WorkerCoroutine = sweep_sessions
    prefix = settings.prefix
    every = set(range(0, 60, SWEEP_EVERY_S))
    crons = [
        cron(
            sweep,
            name=f"{prefix}:cron:sweep",
            second=every,
            run_at_startup=True,
            timeout=settings.job_timeout_s,
        )
    ]
    worker = MemqWorker(
        functions=job_functions(settings),
        cron_jobs=crons if with_cron else None,
        redis_pool=redis,
        queue_name=f"{prefix}:queue",
        health_check_key=f"{prefix}:health-check",
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        max_jobs=concurrency or settings.concurrency,
        # arq keeps a started job's in-progress key for the LONGEST function timeout + 10 s,
        # and other workers re-run a dead worker's job only once it expires: with the cron
        # left at arq's 300 s default, a kill -9 delayed its sessions by 310 s.
        job_timeout=settings.job_timeout_s,
        poll_delay=0.05,
        burst=burst,
        ctx={"runtime": runtime} if runtime is not None else None,
        on_startup=None if runtime is not None else startup,
        on_shutdown=None if runtime is not None else shutdown,
        on_job_start=on_job_start,
        handle_signals=runtime is None,
        # On SIGTERM let the current turn finish; a cancelled job is re-run (nothing half-written).
        job_completion_wait=int(min(settings.job_timeout_s, 30)),
    )
    if runtime is None:
        _stop_turns_on_signals(worker)
    return worker


def _stop_turns_on_signals(worker: Worker) -> None:
    """On SIGTERM/SIGINT, tell running jobs to stop after their current turn, then let arq
    wait for them: otherwise a job keeps starting turns until arq cancels it mid-turn."""

    def on_signal(signum: signal.Signals) -> None:
        rt = worker.ctx.get("runtime")
        if isinstance(rt, Runtime):
            rt.stopping.set()
        worker.handle_sig_wait_for_completion(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        worker.loop.add_signal_handler(signum, on_signal, signum)
