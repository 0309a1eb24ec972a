"""Throughput bench: events/s stored end to end by `memq worker` processes, and broadcast latency.

Run from the repository root: `.venv/bin/python bench/throughput.py` (defaults: about 2.5 minutes
on an idle 2-CPU machine, longer on a busy one; `--help` for the sizes). It starts a private
redis-server on a free loopback port and the loopback fake observer (`deterministic_reply`:
instant, or after 1-2 s like a real provider with `--observer-latency-ms 1000,2000`) in a process
of its own. Then, for each (worker processes, batch size):
start the `memq worker` processes, warm them up, publish a backlog up front and time first
publish → every event stored (counted from the workers' `<prefix>:stats:outcomes` hash, checked
against the SQLite file afterwards); then publish at a steady fraction of that rate and time
publish → `<prefix>:observations` message.

At a real provider's latency, where the observer and not the CPU bounds throughput, compare
worker CPU per event: `PYTHONPATH=$PWD .venv/bin/python bench/throughput.py --observer-latency-ms
1000,2000 --sessions 200 --calls 8 --processes 1 --batches 1 --concurrency 64
--latency-seconds 0` (about a minute).
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

import msgspec
import redis.asyncio as aioredis

from bench.common import (
    CpuMeter,
    WorkerProcesses,
    count_rows,
    fake_observer,
    machine,
    markdown_table,
    other_outcomes,
    percentile,
    private_redis,
    stored,
    wait_stored,
    worker_env,
)
from bench.latency import CallMaker, steady
from bench.redis_cost import RedisCost, redis_cost
from worker.ingest.producer import Producer
from worker.keys import Keys
from worker.settings import Settings

PREFIX = "bench"
KEYS = Keys(PREFIX)
_STARTED = time.monotonic()


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """The bench's sizes, from the command line."""

    sessions: int
    calls: int
    output_chars: int
    processes: list[int]
    batches: list[int]
    concurrency: int
    batch_wait_ms: int
    latency_s: float
    latency_fractions: list[float]
    latency_sessions: list[int]
    chroma: str
    observer_latency_s: tuple[float, float] | None
    workdir: str | None


class Latency(msgspec.Struct, kw_only=True):
    """One steady-rate run: publish → broadcast latencies at a fraction of the drain rate."""

    fraction: float
    sessions: int
    target_rate: float = 0.0
    published_rate: float = 0.0
    latencies_ms: list[float] = []
    missing: int = 0
    calls: int = 0


class Result(msgspec.Struct, kw_only=True):
    """One configuration: its backlog drain and, when run, its steady-rate latencies."""

    processes: int
    batch: int
    events: int = 0
    publish_s: float = 0.0
    drain_s: float = 0.0
    drain_calls: int = 0  # observer requests: shows the batch sizes actually reached
    worker_cpu_s: float = 0.0
    redis: RedisCost = RedisCost()  # the drain's, the bench's publishing and polling included
    latency: list[Latency] = []


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries only the tables)."""
    print(f"[{time.monotonic() - _STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


async def run_config(
    processes: int, batch: int, url: str, observer_url: str, tmp: Path, cfg: Config
) -> Result:
    """Start the workers, warm up, time the backlog drain, then the steady-rate latency."""
    name = f"p{processes}b{batch}"
    data_dir = tmp / name
    result = Result(processes=processes, batch=batch)
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
        await producer.publish_many(warm)
        await wait_stored(client, KEYS, len(warm), workers, timeout_s=180)
        progress(f"{name}: workers up and warm")

        backlog = maker.interleaved(f"{name}-tp", cfg.sessions, cfg.calls)
        base, cpu = await stored(client, KEYS), workers.cpu_seconds()
        redis_before = await redis_cost(client)
        started = time.monotonic()
        await producer.publish_many(backlog)
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


def report(results: Sequence[Result], cfg: Config, noise: str) -> None:
    """Print the machine, the run's noise, the throughput table and the latency table."""
    print(f"Machine: {machine()}.")
    print(
        "redis-server, the fake observer, the bench process (publisher and subscriber) and the "
        f"workers all share these CPUs; {noise}.\n"
    )
    print(
        f"Backlog drain: {cfg.sessions} sessions x {cfg.calls} tool calls of ~"
        f"{cfg.output_chars / 1000:.0f} KB published up front (`Producer.publish_many`), timed "
        "from the first publish until every event is stored; "
        f"MEMQ_CONCURRENCY={cfg.concurrency}, MEMQ_BATCH_WAIT_MS={cfg.batch_wait_ms}, "
        f"MEMQ_CHROMA={cfg.chroma}; {observer_line(cfg)}.\n"
    )
    single = {r.batch: r for r in results if r.processes == 1}
    rows = []
    for r in results:
        rate = r.events / r.drain_s
        one = single.get(r.batch)
        scaling = f"{rate * one.drain_s / one.events:.2f}x" if one else "-"
        rows.append([
            r.processes, r.batch, r.events, round(r.publish_s, 2), round(r.drain_s, 2),
            round(rate), round(rate / r.processes), scaling, round(r.events / r.drain_calls, 2),
        ])  # fmt: skip
    headers = ["processes", "batch", "events", "publish s", "seconds", "events/s",
               "events/s per process", "vs 1 process", "events per observer call"]  # fmt: skip
    print(markdown_table(headers, rows))
    print(
        "\nCost per event over the same drains, and the ceilings it implies. Worker CPU: user + "
        "system of the `memq worker` processes. Redis: the private redis-server's "
        "`INFO commandstats` calls (commands inside Lua scripts included) and `INFO cpu` user + "
        "system, publishing and the bench's polling of the outcomes hash (one HMGET per 10 ms) "
        "included. Events/s one Redis core carries = 1e6 / Redis CPU µs per event; events/s per "
        "worker core = 1000 / worker CPU ms per event; the last column divides it by the "
        "1-process row's (1.00 = no contention between the workers).\n"
    )
    rows = []
    for r in results:
        one = single.get(r.batch)
        per_cpu = r.events / r.worker_cpu_s
        ratio = round(per_cpu / (one.events / one.worker_cpu_s), 2) if one else "-"
        redis_us = r.redis.cpu_s / r.events * 1e6
        rows.append([
            r.processes, r.batch, round(r.worker_cpu_s / r.events * 1000, 2),
            round(r.redis.commands / r.events, 1), round(redis_us, 1),
            round(1e6 / redis_us), round(per_cpu), ratio,
        ])  # fmt: skip
    headers = ["processes", "batch", "worker CPU ms per event", "Redis commands per event",
               "Redis CPU µs per event", "events/s one Redis core carries",
               "events/s per worker core", "per worker CPU-second vs 1 process"]  # fmt: skip
    print(markdown_table(headers, rows))
    if cfg.latency_s <= 0:
        return
    fractions = ", ".join(f"{f:.0%}" for f in cfg.latency_fractions)
    spreads = ", ".join(str(n) for n in cfg.latency_sessions)
    print(
        f"\nPublish → broadcast latency at {fractions} of each row's drain rate: "
        f"{cfg.latency_s:g} s of steady publishing spread round-robin over {spreads} sessions; "
        "publish time taken before the call, receive time when the bench's subscriber to "
        f"`{KEYS.observations}` reads the message.\n"
    )
    rows = []
    for r in results:
        for run in r.latency:
            ms = run.latencies_ms
            per_call = round(len(ms) / run.calls, 2) if run.calls else "-"
            rows.append([
                r.processes, r.batch, run.sessions, f"{run.fraction:.0%}", round(run.target_rate),
                round(run.published_rate), len(ms),
                *((round(percentile(ms, q)) for q in (50, 99)) if ms else ("-", "-")),
                round(max(ms)) if ms else "-",
                run.missing, per_call,
            ])  # fmt: skip
    headers = ["processes", "batch", "sessions", "of drain rate", "target events/s",
               "published events/s", "events", "p50 ms", "p99 ms", "max ms", "missing",
               "events per observer call"]  # fmt: skip
    print(markdown_table(headers, rows))


def observer_line(cfg: Config) -> str:
    """How fast the fake observer answers."""
    if cfg.observer_latency_s is None:
        return "the fake observer answers at once"
    low, high = (round(v * 1000) for v in cfg.observer_latency_s)
    return f"the fake observer answers after a uniform {low}-{high} ms"


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
    )


def _latency_range(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    low, _, high = text.partition(",")
    return int(low) / 1000, int(high or low) / 1000


async def run_all(cfg: Config, url: str, observer_url: str, tmp: Path) -> list[Result]:
    """Every (processes, batch) configuration, one after the other."""
    return [
        await run_config(processes, batch, url, observer_url, tmp, cfg)
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
    report(results, cfg, noise)


if __name__ == "__main__":
    main()
