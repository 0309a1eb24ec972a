"""Overhead bench: what memq adds to publish → broadcast beside an observer that takes 1-2 s.

Run from the repository root: `PYTHONPATH=$PWD .venv/bin/python bench/overhead.py` (about
1.5 minutes; `--help` for the sizes). It starts a private redis-server on a free loopback port,
the loopback fake observer in a process of its own, answering each turn after a delay spread
over 1-2 s that the bench can compute from the turn's last tool call
(`bench.latency.token_delay_s`), and `memq worker` processes with enough `MEMQ_CONCURRENCY`
that the observer, not the CPU, bounds them. It publishes at a modest steady rate spread
round-robin over many sessions (so each turn carries one event) and reports, per event,
publish → broadcast latency minus that event's observer delay: memq's own overhead (publish,
queueing, the worker's turn, SQLite, the broadcast), with the observer call's HTTP round trip
counted against memq.

`--observers` compares providers, one run each: `anthropic` and `openai` (the HTTP adapters)
and `claude-code` (the Claude Code CLI through claude-agent-sdk, warm processes per worker;
`claude-code:0` starts a process per call), e.g. `--observers anthropic,openai,claude-code
--sessions 4 --rate 2` (a CLI process per live session: a few sessions, as one user has).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import redis.asyncio as aioredis

from bench.charts import Bar, Group, write_chart
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
    progress,
    stored,
    wait_stored,
    worker_env,
)
from bench.latency import CallMaker, steady, token_delay_s
from bench.redis_cost import RedisCost, redis_cost
from worker.ingest.producer import Producer, prepare_event
from worker.keys import Keys
from worker.settings import Settings

PREFIX = "overhead"
KEYS = Keys(PREFIX)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """The bench's sizes, from the command line."""

    processes: int
    concurrency: int
    batch: int
    sessions: int
    rate: float
    seconds: float
    observer_s: tuple[float, float]
    workdir: str | None
    observers: tuple[str, ...] = ("anthropic",)


class Result(msgspec.Struct, kw_only=True):
    """One steady run: per-event latencies, observer delays and what the run cost."""

    observer: str = "anthropic"
    events: int = 0
    published_rate: float = 0.0
    latency_ms: list[float] = []
    observer_ms: list[float] = []
    missing: int = 0
    observer_calls: int = 0
    worker_cpu_s: float = 0.0
    redis: RedisCost = RedisCost()
    seconds: float = 0.0  # from the first publish until the last broadcast waited for


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a live process and its descendants, live or already waited for: a
    claude-code worker's CLI processes count against it."""
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    own = sum(int(parts[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS  # + cutime, cstime
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                children.append(int(stat.parent.name))
        except (OSError, IndexError):
            continue
    return own + sum(tree_cpu_s(child) for child in children)


def provider_env(observer: str, observer_url: str) -> dict[str, str]:
    """MEMQ_OBSERVER and the provider's variables for `observer` (`claude-code:N`: N warm)."""
    name, _, warm = observer.partition(":")
    if name == "openai":
        return {"MEMQ_OBSERVER": "openai", "OPENAI_BASE_URL": observer_url + "/v1",
                "OPENAI_API_KEY": "x"}  # fmt: skip
    if name == "claude-code":  # its CLI gets ANTHROPIC_BASE_URL/ANTHROPIC_API_KEY
        return {"MEMQ_OBSERVER": name} | ({"MEMQ_CLAUDE_CODE_WARM": warm} if warm else {})
    return {"MEMQ_OBSERVER": "anthropic"}


async def run(cfg: Config, url: str, observer_url: str, tmp: Path, observer: str) -> Result:
    """Start the workers, warm every session up, then publish at the steady rate."""
    data_dir = tmp / "data"
    result = Result(observer=observer)
    maker = CallMaker(2000)
    client = aioredis.Redis.from_url(url)
    producer = Producer(client, Settings(prefix=PREFIX, max_pending_per_session=1_000_000))
    env = worker_env(url, observer_url, data_dir, prefix=PREFIX, batch_max_events=cfg.batch,
                     batch_wait_ms=0, concurrency=cfg.concurrency, chroma="off")  # fmt: skip
    env |= provider_env(observer, observer_url)
    workers = WorkerProcesses(cfg.processes, env, tmp / "logs")
    try:
        warm = maker.interleaved("warm", cfg.sessions, 1)
        await producer.publish_many([prepare_event(e, producer.settings) for e in warm])
        await wait_stored(client, KEYS, len(warm), workers, timeout_s=180)
        progress(f"workers up, {cfg.sessions} sessions warm")
        count = max(1, int(cfg.rate * cfg.seconds))
        calls = [maker.call(f"run-s{i % cfg.sessions}", i) for i in range(count)]
        cpu = sum(tree_cpu_s(p.pid) for p in workers.procs)
        before, started = await redis_cost(client), time.monotonic()
        latencies, result.missing, result.published_rate = await steady(
            producer, client, KEYS.observations, workers, calls, cfg.rate,
            settle_s=cfg.observer_s[1] + 20,
        )  # fmt: skip
        result.worker_cpu_s = sum(tree_cpu_s(p.pid) for p in workers.procs) - cpu
        result.redis = await redis_cost(client) - before
        result.seconds = time.monotonic() - started
        result.events = count
        result.latency_ms = list(latencies.values())
        result.observer_ms = [token_delay_s(t, *cfg.observer_s) * 1000 for t in latencies]
        progress(f"{count} events published at {result.published_rate:.1f}/s")
        if bad := await other_outcomes(client, KEYS):
            progress(f"warning: outcomes other than stored: {bad}")
        if (done := await stored(client, KEYS)) != len(warm) + count:
            progress(f"warning: {done} rows stored of {len(warm) + count}")
    finally:
        workers.stop(grace_s=10)
        await client.aclose()
    result.observer_calls = count_rows(data_dir, "token_usage", "run")
    return result


def report(results: list[Result], cfg: Config, noise: str) -> None:
    """Print the machine, the run's noise and one row per run."""
    low, high = (round(v * 1000) for v in cfg.observer_s)
    print(f"Machine: {machine()}.")
    print(f"redis-server, the fake observer, the bench and the workers share the CPUs; {noise}.\n")
    print(
        f"{cfg.processes} `memq worker` process(es), MEMQ_CONCURRENCY={cfg.concurrency}, "
        f"MEMQ_BATCH_MAX_EVENTS={cfg.batch}, MEMQ_BATCH_WAIT_MS=0, MEMQ_BATCH_MAX_WAIT_S=0 (a "
        f"turn as soon as its call arrives), MEMQ_CHROMA=off; the fake observer answers each "
        f"turn after {low}-{high} ms (known per event). {cfg.rate:g} events/s of ~2 KB tool "
        f"calls for {cfg.seconds:g} s, round-robin over {cfg.sessions} sessions (one call per "
        f"session every {cfg.sessions / cfg.rate:g} s). Overhead = publish → broadcast latency "
        "minus the event's observer delay: publishing, queueing, the worker's turn, the "
        "observer's HTTP round trip, SQLite and the broadcast. Worker CPU and Redis columns: "
        "the whole steady run, idle polling included (at this rate it is most of Redis's "
        "load).\n"
    )
    rows = []
    for r in results:
        over = [lat - obs for lat, obs in zip(r.latency_ms, r.observer_ms, strict=True)]
        rows.append([
            r.observer, round(r.published_rate, 1), len(over), r.missing,
            round(len(over) / r.observer_calls, 2) if r.observer_calls else "-",
            *(round(percentile(r.latency_ms, q)) for q in (50, 99)),
            *(round(percentile(over, q)) for q in (50, 90, 99)), round(max(over)),
            round(r.worker_cpu_s / r.events * 1000, 2), round(r.redis.commands / r.seconds),
            round(r.redis.cpu_s / r.seconds * 100, 1),
        ])  # fmt: skip
    headers = ["observer", "published events/s", "events", "missing", "events per observer call",
               "latency p50 ms", "latency p99 ms", "overhead p50 ms", "overhead p90 ms",
               "overhead p99 ms", "overhead max ms", "worker CPU ms per event (CLI included)",
               "Redis commands/s", "Redis CPU %"]  # fmt: skip
    print(markdown_table(headers, rows))


def chart(results: list[Result], path: Path) -> Path:
    """Overhead percentiles per run as a bar chart (SVG), from the same results as the table."""
    groups = []
    for n, r in enumerate(results, 1):
        over = [lat - obs for lat, obs in zip(r.latency_ms, r.observer_ms, strict=True)]
        bars = [Bar(f"p{q}", percentile(over, q), i) for i, q in enumerate((50, 90, 99))]
        groups.append(Group(f"run {n}: {r.observer}, {len(over)} events", bars))
    title = "memq's overhead per event beside a 1-2 s observer (publish to broadcast, ms)"
    return write_chart(path, title, "ms", groups)


def parse_args() -> tuple[Config, int, Path | None]:
    """Command-line sizes; the defaults take about 1.5 minutes per run."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    p.add_argument("--processes", type=int, default=1, help="`memq worker` processes")
    p.add_argument("--concurrency", type=int, default=64, help="MEMQ_CONCURRENCY per process")
    p.add_argument("--batch", type=int, default=8, help="MEMQ_BATCH_MAX_EVENTS")
    p.add_argument("--sessions", type=int, default=200, help="sessions to spread over")
    p.add_argument("--rate", type=float, default=20, help="events/s published")
    p.add_argument("--seconds", type=float, default=60, help="how long to publish")
    p.add_argument("--observer-latency-ms", default="1000,2000", metavar="LOW,HIGH")
    p.add_argument("--runs", type=int, default=1, help="runs, each with fresh Redis and workers")
    p.add_argument("--workdir", help="where the temporary directory goes (default: the system's)")
    p.add_argument(
        "--observers",
        default="anthropic",
        metavar="NAME[:WARM],…",
        help="providers to compare: anthropic, openai, claude-code, claude-code:0",
    )
    p.add_argument("--chart", type=Path, help="also write the percentiles chart (SVG) here")
    a = p.parse_args()
    low, _, high = a.observer_latency_ms.partition(",")
    cfg = Config(processes=a.processes, concurrency=a.concurrency, batch=a.batch,
                 sessions=a.sessions, rate=a.rate, seconds=a.seconds,
                 observer_s=(int(low) / 1000, int(high or low) / 1000),
                 workdir=a.workdir, observers=tuple(a.observers.split(",")))  # fmt: skip
    return cfg, a.runs, a.chart


def main() -> None:
    cfg, runs, chart_path = parse_args()
    meter = CpuMeter()
    results = []
    with tempfile.TemporaryDirectory(prefix="memq-overhead-", dir=cfg.workdir) as name:
        for n in range(runs):
            for observer in cfg.observers:
                tmp = Path(name) / f"run{n}-{observer.replace(':', '-')}"
                with private_redis(tmp / "redis") as server, \
                        fake_observer(cfg.observer_s, True) as obs:  # fmt: skip
                    results.append(asyncio.run(run(cfg, server.url, obs.url, tmp, observer)))
        noise = meter.report()
    report(results, cfg, noise)
    if chart_path:
        print(f"\nchart: {chart(results, chart_path)}")


if __name__ == "__main__":
    main()
