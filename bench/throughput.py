"""Throughput bench: events/s stored end to end by `memq worker` processes, what each event costs
the workers and Redis, and broadcast latency.

Run from the repository root: `PYTHONPATH=$PWD .venv/bin/python bench/throughput.py` (defaults:
about 2.5 minutes on an idle 2-CPU machine; `--help` for the sizes). It starts a private
redis-server on a free loopback port and the fake observer (at once, or after 1-2 s like a real
provider with `--observer-latency-ms 1000,2000`) in a process of its own. For each round and
(worker processes, batch size): start the workers, warm them up, publish a backlog up front and
time first publish → every event stored (the workers' `<prefix>:stats:outcomes` hash, checked
against SQLite afterwards), reading worker CPU and Redis `INFO` around it; then publish at a
steady fraction of that rate and time publish → `<prefix>:observations` message.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio as aioredis

from bench.common import (
    CpuMeter,
    WorkerProcesses,
    count_rows,
    fake_observer,
    other_outcomes,
    private_redis,
    progress,
    stored,
    wait_stored,
    worker_env,
)
from bench.latency import CallMaker, steady
from bench.redis_cost import redis_cost
from bench.throughput_report import Config, Latency, Result, report
from worker.ingest.producer import Producer, prepare_event
from worker.keys import Keys
from worker.settings import Settings

PREFIX = "bench"
KEYS = Keys(PREFIX)
IDLE_S = 3.0


async def run_config(
    processes: int, batch: int, repeat: int, url: str, observer_url: str, tmp: Path, cfg: Config
) -> Result:
    """Start the workers, warm up, time the backlog drain, then the steady-rate latency."""
    name = f"p{processes}b{batch}r{repeat}"
    data_dir = tmp / name
    result = Result(processes=processes, batch=batch, repeat=repeat)
    maker = CallMaker(cfg.output_chars)
    client = aioredis.Redis.from_url(url)
    await client.flushall()
    producer = Producer(client, Settings(prefix=PREFIX, max_pending_per_session=1_000_000))
    env = worker_env(url, observer_url, data_dir, prefix=PREFIX, batch_max_events=batch,
                     batch_wait_ms=cfg.batch_wait_ms, concurrency=cfg.concurrency,
                     chroma=cfg.chroma)  # fmt: skip
    workers = WorkerProcesses(processes, env, tmp / "logs" / name)
    try:
        warm = maker.interleaved(f"{name}-warm", cfg.concurrency * processes, 2)
        await producer.publish_many([prepare_event(e, producer.settings) for e in warm])
        await wait_stored(client, KEYS, len(warm), workers, timeout_s=180)
        progress(f"{name}: workers up and warm")
        cpu, before = workers.cpu_seconds(), await redis_cost(client)
        await asyncio.sleep(IDLE_S)  # what the processes cost doing nothing: queue polling
        result.idle_cpu_per_s = (workers.cpu_seconds() - cpu) / IDLE_S
        result.idle_redis_per_s = (await redis_cost(client) - before).commands / IDLE_S

        backlog = maker.interleaved(f"{name}-tp", cfg.sessions, cfg.calls)
        base, cpu = await stored(client, KEYS), workers.cpu_seconds()
        redis_before = await redis_cost(client)
        started = time.monotonic()
        await producer.publish_many([prepare_event(e, producer.settings) for e in backlog])
        result.publish_s = time.monotonic() - started
        done = await wait_stored(client, KEYS, base + len(backlog), workers, timeout_s=600)
        result.events, result.drain_s = len(backlog), done - started
        result.worker_cpu_s = workers.cpu_seconds() - cpu
        result.redis = await redis_cost(client) - redis_before
        progress(f"{name}: {len(backlog)} events stored in {result.drain_s:.2f} s")

        runs = [(f, n) for n in cfg.latency_sessions for f in cfg.latency_fractions]
        for fraction, sessions in runs if cfg.latency_s > 0 else []:
            run = Latency(fraction=fraction, sessions=sessions,
                          target_rate=fraction * result.events / result.drain_s)  # fmt: skip
            count = max(1, int(run.target_rate * cfg.latency_s))
            tag = f"{latency_tag(name, run)}-s"  # count_rows matches "<tag>-%"
            calls = [maker.call(f"{tag}{i % sessions}", i) for i in range(count)]
            latencies, run.missing, run.published_rate = await steady(
                producer, client, KEYS.observations, workers, calls, run.target_rate
            )
            run.latencies_ms = list(latencies.values())
            result.latency.append(run)
            progress(f"{name}: latency run at {fraction:.0%} over {sessions} sessions done")
        if bad := await other_outcomes(client, KEYS):
            progress(f"warning: {name}: outcomes other than stored: {bad}")
    finally:
        killed = workers.stop(grace_s=10)
        await client.aclose()
    if killed:
        progress(f"{name}: {killed} worker process(es) ignored SIGTERM for 10 s: killed")
    if count_rows(data_dir, "processed_events", f"{name}-tp") != result.events:
        raise SystemExit(f"{name}: SQLite holds a different number of processed events")
    result.drain_calls = count_rows(data_dir, "token_usage", f"{name}-tp")
    for run in result.latency:
        run.calls = count_rows(data_dir, "token_usage", latency_tag(name, run))
    return result


def latency_tag(name: str, run: Latency) -> str:
    """The session-id prefix of one latency run (its rows are counted by it)."""
    return f"{name}-lat{run.fraction:g}-n{run.sessions}"


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """Command-line sizes; the defaults take about 2.5 minutes on an idle 2-CPU machine."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    p.add_argument("--sessions", type=int, default=200, help="sessions in the backlog")
    p.add_argument("--calls", type=int, default=20, help="tool calls per session")
    p.add_argument("--output-chars", type=int, default=2000, help="tool output size")
    p.add_argument("--processes", default="1,2", help="worker process counts, comma-separated")
    p.add_argument("--batches", default="1,8", help="MEMQ_BATCH_MAX_EVENTS values")
    p.add_argument("--concurrency", type=int, default=16, help="MEMQ_CONCURRENCY per process")
    p.add_argument("--batch-wait-ms", type=int, default=0, help="MEMQ_BATCH_WAIT_MS")
    p.add_argument("--latency-seconds", type=float, default=6, help="0 skips the latency runs")
    p.add_argument("--latency-fractions", default="0.5,0.25",
                   help="of the drain rate, comma-separated")  # fmt: skip
    p.add_argument("--latency-sessions", default="200",
                   help="sessions to spread over, comma-separated (a run for each)")  # fmt: skip
    p.add_argument("--chroma", default="off", choices=["off", "on"],
                   help="MEMQ_CHROMA; `on` adds the embedded index's embedding work")  # fmt: skip
    p.add_argument("--observer-latency-ms", metavar="LOW,HIGH",
                   help="the fake observer answers after a uniform LOW..HIGH ms")  # fmt: skip
    p.add_argument("--workdir", help="where the temporary directory goes (default: the system's)")
    p.add_argument("--repeats", type=int, default=1,
                   help="run every configuration this many times, in rounds")  # fmt: skip
    a = p.parse_args(argv)
    return Config(
        sessions=a.sessions,
        calls=a.calls,
        output_chars=a.output_chars,
        processes=[int(v) for v in a.processes.split(",")],
        batches=[int(v) for v in a.batches.split(",")],
        concurrency=a.concurrency,
        batch_wait_ms=a.batch_wait_ms,
        latency_s=a.latency_seconds,
        latency_fractions=[float(f) for f in a.latency_fractions.split(",")],
        latency_sessions=[int(v) for v in a.latency_sessions.split(",")],
        chroma=a.chroma,
        observer_latency_s=_latency_range(a.observer_latency_ms),
        workdir=a.workdir,
        repeats=a.repeats,
    )


def _latency_range(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    low, _, high = text.partition(",")
    return int(low) / 1000, int(high or low) / 1000


async def run_all(cfg: Config, url: str, observer_url: str, tmp: Path) -> list[Result]:
    """Every (processes, batch) configuration, one after the other, `repeats` times over."""
    return [
        await run_config(processes, batch, repeat, url, observer_url, tmp, cfg)
        for repeat in range(cfg.repeats)
        for processes in cfg.processes
        for batch in cfg.batches
    ]


def main() -> None:
    cfg = parse_args()
    meter = CpuMeter()
    with tempfile.TemporaryDirectory(prefix="memq-bench-", dir=cfg.workdir) as name:
        tmp = Path(name)
        with (
            private_redis(tmp / "redis") as server,
            fake_observer(cfg.observer_latency_s) as observer,
        ):
            assert server.proc is not None
            results = asyncio.run(run_all(cfg, server.url, observer.url, tmp))
            noise = meter.report([server.proc.pid, observer.proc.pid])
    report(results, cfg, noise, KEYS.observations)


if __name__ == "__main__":
    main()
