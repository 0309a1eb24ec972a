"""The throughput bench's records and its report: drain and cost tables, CPU ratios, latencies."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from bench.common import machine, markdown_table, percentile
from bench.redis_cost import RedisCost


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
    repeats: int


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
    repeat: int = 0
    events: int = 0
    publish_s: float = 0.0
    drain_s: float = 0.0
    drain_calls: int = 0  # observer requests: shows the batch sizes actually reached
    worker_cpu_s: float = 0.0
    idle_cpu_per_s: float = 0.0  # worker CPU-seconds per second, idle, all processes
    idle_redis_per_s: float = 0.0  # Redis commands per second, idle
    redis: RedisCost = RedisCost()  # the drain's, the bench's publishing and polling included
    latency: list[Latency] = []


def report(results: Sequence[Result], cfg: Config, noise: str, channel: str) -> None:
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
        f"MEMQ_CHROMA={cfg.chroma}; {observer_line(cfg)}. The benches set "
        "MEMQ_BATCH_MAX_WAIT_S=0 (`bench/common.worker_env`): every turn is due at once instead "
        "of waiting up to 30 s for its batch to fill, so a drain is not held back.\n"
    )
    single = {(r.batch, r.repeat): r for r in results if r.processes == 1}
    rows = []
    for r in results:
        rate = r.events / r.drain_s
        one = single.get((r.batch, r.repeat))
        scaling = f"{rate * one.drain_s / one.events:.2f}x" if one else "-"
        rows.append([
            r.repeat + 1, r.processes, r.batch, r.events, round(r.publish_s, 2),
            round(r.drain_s, 2), round(rate), round(rate / r.processes), scaling,
            round(r.events / r.drain_calls, 2),
        ])  # fmt: skip
    headers = ["round", "processes", "batch", "events", "publish s", "seconds", "events/s",
               "events/s per process", "vs 1 process", "events per observer call"]  # fmt: skip
    print(markdown_table(headers, rows))
    print(
        "\nCost per event over the same drains, and the ceilings it implies. Worker CPU: user + "
        "system of the `memq worker` processes. Redis: the private redis-server's "
        "`INFO commandstats` calls (commands inside Lua scripts included) and `INFO cpu` user + "
        "system, publishing and the bench's polling of the outcomes hash (one HMGET per 10 ms) "
        "included. Events/s one Redis core carries = 1e6 / Redis CPU µs per event; events/s per "
        "worker core = 1000 / worker CPU ms per event; the last column divides it by the "
        "1-process row's (1.00 = no contention between the workers). Idle: the same processes "
        "measured for 3 s with nothing to do, just before the drain (queue polling).\n"
    )
    rows = []
    for r in results:
        one = single.get((r.batch, r.repeat))
        per_cpu = r.events / r.worker_cpu_s
        ratio = round(per_cpu / (one.events / one.worker_cpu_s), 2) if one else "-"
        redis_us = r.redis.cpu_s / r.events * 1e6
        rows.append([
            r.repeat + 1, r.processes, r.batch, round(r.worker_cpu_s / r.events * 1000, 2),
            round(r.redis.commands / r.events, 1), round(redis_us, 1),
            round(1e6 / redis_us), round(per_cpu), ratio, round(r.idle_cpu_per_s * 1000, 1),
            round(r.idle_redis_per_s),
        ])  # fmt: skip
    headers = ["round", "processes", "batch", "worker CPU ms per event", "Redis commands per event",
               "Redis CPU µs per event", "events/s one Redis core carries",
               "events/s per worker core", "per worker CPU-second vs 1 process",
               "idle worker CPU ms/s", "idle Redis commands/s"]  # fmt: skip
    print(markdown_table(headers, rows))
    print_ratios(results)
    if cfg.latency_s <= 0:
        return
    fractions = ", ".join(f"{f:.0%}" for f in cfg.latency_fractions)
    spreads = ", ".join(str(n) for n in cfg.latency_sessions)
    print(
        f"\nPublish → broadcast latency at {fractions} of each row's drain rate: "
        f"{cfg.latency_s:g} s of steady publishing spread round-robin over {spreads} sessions; "
        "publish time taken before the call, receive time when the bench's subscriber to "
        f"`{channel}` reads the message.\n"
    )
    rows = []
    for r in results:
        for run in r.latency:
            ms = run.latencies_ms
            per_call = round(len(ms) / run.calls, 2) if run.calls else "-"
            rows.append([
                r.repeat + 1, r.processes, r.batch, run.sessions, f"{run.fraction:.0%}",
                round(run.target_rate), round(run.published_rate), len(ms),
                *((round(percentile(ms, q)) for q in (50, 99)) if ms else ("-", "-")),
                round(max(ms)) if ms else "-",
                run.missing, per_call,
            ])  # fmt: skip
    headers = ["round", "processes", "batch", "sessions", "of drain rate", "target events/s",
               "published events/s", "events", "p50 ms", "p99 ms", "max ms", "missing",
               "events per observer call"]  # fmt: skip
    print(markdown_table(headers, rows))


def print_ratios(results: Sequence[Result]) -> None:
    """Events per worker CPU-second, each process count over 1 process, per round and median."""
    for net in (False, True):
        for (processes, batch), rounds in sorted(cpu_ratios(results, net).items()):
            listed = ", ".join(f"{v:.2f}" for v in rounds)
            what = "net of idle CPU" if net else "all CPU"
            print(f"\nEvents per worker CPU-second ({what}), {processes} processes / 1, batch "
                  f"{batch}: {listed} (median {statistics.median(rounds):.2f})")  # fmt: skip


def cpu_ratios(results: Sequence[Result], net: bool) -> dict[tuple[int, int], list[float]]:
    """Per (processes, batch): each round's events per worker CPU-second over 1 process's."""

    def per_cpu(r: Result) -> float:
        return r.events / (r.worker_cpu_s - (r.idle_cpu_per_s * r.drain_s if net else 0.0))

    one = {(r.batch, r.repeat): per_cpu(r) for r in results if r.processes == 1}
    ratios: dict[tuple[int, int], list[float]] = {}
    for r in results:
        if r.processes > 1 and (r.batch, r.repeat) in one:
            ratios.setdefault((r.processes, r.batch), []).append(
                per_cpu(r) / one[(r.batch, r.repeat)]
            )
    return ratios


def observer_line(cfg: Config) -> str:
    """How fast the fake observer answers."""
    if cfg.observer_latency_s is None:
        return "the fake observer answers at once"
    low, high = (round(v * 1000) for v in cfg.observer_latency_s)
    return f"the fake observer answers after a uniform {low}-{high} ms"
