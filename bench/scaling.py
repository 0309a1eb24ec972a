"""Scaling bench: throughput with 1, 2 and 4 `memq worker` processes on SQLite and on
PostgreSQL, and the Redis and database cost of one event.

Run from the repository root: `.venv/bin/python bench/scaling.py` (about two minutes on 2 CPUs;
`--help` for the sizes and `--backends`). It starts a private redis-server on a free loopback
port, the fake observer (instant `deterministic_reply`) in a process of its own and a private
PostgreSQL cluster (the tests' tests/support/postgres_server.py: initdb + pg_ctl in a temp dir,
a free loopback port, never the shared 5432; fsync off). For each backend and process count:
a fresh SQLite data dir or a fresh PostgreSQL database (CREATE DATABASE, dropped afterwards),
the workers started and warmed up, then a backlog of tool calls published up front and timed
until every event is stored. Redis cost is the change in `INFO commandstats` calls (commands
run inside Lua scripts count too) per stored event, shown with and without the workers' idle
polling (measured for a second before the backlog); database cost is the rows each table
gained per event (SQLite's FTS5 shadow tables summed as `fts index`; PostgreSQL keeps its
search index in a tsvector column, so it adds no rows). Without PostgreSQL server binaries
the PostgreSQL column says so and the SQLite runs still happen. MEMQ_CHROMA=off: vector
indexing is not part of the pipeline measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import redis.asyncio as aioredis

from bench.common import (
    CpuMeter,
    WorkerProcesses,
    fake_observer,
    machine,
    markdown_table,
    private_redis,
    progress,
    worker_env,
)
from bench.databases import Database, cluster_cpu_s, private_postgres
from pipeline.events import Event, ToolCall
from tests.support.postgres_server import PostgresServer
from worker.ingest.producer import Producer, prepare_event
from worker.keys import Keys
from worker.settings import Settings

PREFIX = "scale"
KEYS = Keys(PREFIX)
_OUTPUT = "".join(f"tests/test_cart.py::test_{j} PASSED [{j:3d}%]\n" for j in range(40))[:1500]
BACKENDS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """The bench's sizes, from the command line."""

    sessions: int
    calls: int
    processes: list[int]
    backends: list[str]
    concurrency: int
    batch: int
    workdir: str | None


class Result(msgspec.Struct, kw_only=True):
    """One backend and process count: throughput, Redis commands and rows written."""

    backend: str
    processes: int
    events: int = 0
    seconds: float = 0.0
    commands: int = 0
    idle_per_s: float = 0.0
    by_command: dict[str, int] = {}
    rows: dict[str, int] = {}
    publish_commands: int = 0


def calls(tag: str, sessions: int, per_session: int) -> list[Event]:
    """`per_session` ~1.5 KB Bash calls for each session, interleaved as agents publish them."""
    return [
        ToolCall(
            event_id=f"{tag}-{s}-{n}",
            memory_session_id=f"{tag}-s{s}",
            project="shop",
            occurred_at=datetime.now(UTC),
            tool_name="Bash",
            tool_input={"command": f"pytest -k case_{tag}_{s}_{n}"},
            tool_output=_OUTPUT,
            cwd="/home/dev/shop",
        )
        for n in range(per_session)
        for s in range(sessions)
    ]


async def command_calls(client: aioredis.Redis) -> dict[str, int]:
    """Calls per command since the server started (`INFO commandstats`)."""
    info = await client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """Calls per command between two readings (INFO itself left out)."""
    return {
        k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0) and k != "info"
    }


async def stored(client: aioredis.Redis) -> int:
    """Rows the workers report stored or deduplicated so far."""
    values = await cast(
        Awaitable[list[bytes | None]], client.hmget(KEYS.outcomes, ["stored", "deduplicated"])
    )
    return sum(int(v or 0) for v in values)


async def wait_stored(
    client: aioredis.Redis, target: int, workers: WorkerProcesses, timeout_s: float
) -> float:
    """Poll every 10 ms until `target` rows are stored; the monotonic time it happened."""
    deadline = time.monotonic() + timeout_s
    while (count := await stored(client)) < target:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {count} of {target} rows stored after {timeout_s:.0f} s")
        workers.check_alive()
        await asyncio.sleep(0.01)
    return time.monotonic()


async def publish_cost(client: aioredis.Redis, producer: Producer, count: int) -> float:
    """Redis commands per published event (the publish script and what it runs)."""
    events = calls("pub", max(1, count // 10), 10)
    before = await command_calls(client)
    await producer.publish_many([prepare_event(e, producer.settings) for e in events])
    spent = delta(await command_calls(client), before)
    await client.flushall()
    return sum(spent.values()) / len(events)


async def run_config(
    backend: str, processes: int, url: str, observer_url: str, tmp: Path, cfg: Config,
    pg: PostgresServer | None,
) -> Result:  # fmt: skip
    """Start the workers, warm up, measure idle polling, then time the backlog."""
    data = tmp / f"{backend}-p{processes}"
    result = Result(backend=backend, processes=processes)
    database = Database(data, pg if backend == "postgresql" else None)
    client = aioredis.Redis.from_url(url)
    await client.flushall()
    producer = Producer(client, Settings(prefix=PREFIX, max_pending_per_session=1_000_000))
    env = worker_env(url, observer_url, data, prefix=PREFIX, concurrency=cfg.concurrency,
                     batch_max_events=cfg.batch, batch_wait_ms=0, chroma="off",
                     **await database.create())  # fmt: skip
    workers = WorkerProcesses(processes, env, tmp / "logs" / f"{backend}-p{processes}")
    name = f"{BACKENDS[backend]}, {processes} process(es)"
    try:
        warm = calls("warm", cfg.concurrency * processes, 2)
        await producer.publish_many([prepare_event(e, producer.settings) for e in warm])
        await wait_stored(client, len(warm), workers, timeout_s=180)
        progress(f"{name}: up and warm")
        before = await command_calls(client)
        await asyncio.sleep(1.0)
        result.idle_per_s = sum(delta(await command_calls(client), before).values()) / 1.0
        rows_before = await database.rows()
        backlog = calls("run", cfg.sessions, cfg.calls)
        base = await stored(client)
        before = await command_calls(client)
        started = time.monotonic()
        await producer.publish_many([prepare_event(e, producer.settings) for e in backlog])
        done = await wait_stored(client, base + len(backlog), workers, timeout_s=900)
        spent = delta(await command_calls(client), before)
        result.events, result.seconds = len(backlog), done - started
        result.by_command = spent
        result.commands = sum(spent.values())
        progress(f"{name}: {len(backlog)} events in {result.seconds:.2f} s")
    finally:
        workers.stop()
        await client.aclose()
    try:
        after = await database.rows()
    finally:
        await database.drop()
    result.rows = {k: n - rows_before.get(k, 0) for k, n in after.items()}
    return result


def throughput_table(results: Sequence[Result], cfg: Config, pg_missing: str | None) -> str:
    """Seconds, events/s and speed-up over one process, one column group per backend."""
    backends = sorted({r.backend for r in results}, key=list(BACKENDS).index)
    headers = ["processes", "events"]
    for b in backends:
        headers += [f"{BACKENDS[b]} s", f"{BACKENDS[b]} events/s", "vs 1 process"]
    if pg_missing is not None:
        headers.append("PostgreSQL events/s")
    rows: list[list[object]] = []
    for n in cfg.processes:
        row: list[object] = [n, cfg.sessions * cfg.calls]
        for b in backends:
            runs = [r for r in results if r.backend == b]
            single = runs[0].events / runs[0].seconds
            (r,) = [r for r in runs if r.processes == n]
            rate = r.events / r.seconds
            row += [round(r.seconds, 2), round(rate), f"{rate / single:.2f}x"]
        rows.append(row + (["not run (see below)"] if pg_missing is not None else []))
    table = markdown_table(headers, rows)
    return table if pg_missing is None else f"{table}\n\nPostgreSQL: {pg_missing}"


def report(
    results: Sequence[Result], cfg: Config, publish: float, noise: str, pg_missing: str | None
) -> None:
    """Print the machine, the throughput table and the cost-per-event tables."""
    print(f"Machine: {machine()} (this machine has 2 cores: more than 2 processes share them).")
    print(f"redis-server, the fake observer, PostgreSQL, the bench and the workers share the "
          f"CPUs; {noise}.\n")  # fmt: skip
    print(
        f"Backlog: {cfg.sessions} sessions x {cfg.calls} tool calls (~1.5 KB) published up "
        f"front, timed until every event is stored; MEMQ_CONCURRENCY={cfg.concurrency} per "
        f"process, MEMQ_BATCH_MAX_EVENTS={cfg.batch}, MEMQ_BATCH_WAIT_MS=0, MEMQ_CHROMA=off; "
        "PostgreSQL with fsync and synchronous_commit off (a test cluster).\n"
    )
    print(throughput_table(results, cfg, pg_missing))
    print(
        f"\nRedis commands per event: every call from the first publish until the last event "
        f"was stored (publishing included: {publish:.1f} per event, measured alone), and the "
        "same net of the workers' idle polling (its rate times the run's duration):\n"
    )
    rows = []
    for r in results:
        idle = r.idle_per_s * r.seconds
        top = sorted(r.by_command.items(), key=lambda kv: -kv[1])[:5]
        rows.append([BACKENDS[r.backend], r.processes, round(r.commands / r.events, 1),
                     round(max(0.0, r.commands - idle) / r.events, 1), round(r.idle_per_s),
                     ", ".join(f"{k} {n / r.events:.1f}" for k, n in top)])  # fmt: skip
    print(markdown_table(["backend", "processes", "commands/event", "net of polling",
                          "idle commands/s", "top commands per event"], rows))  # fmt: skip
    tables = sorted({t for r in results for t, n in r.rows.items() if n})
    print("\nDatabase rows added per event, by table (updates, e.g. marking rows announced, not "
          "counted; PostgreSQL's search index is a column, not rows):\n")  # fmt: skip
    rows = [
        [BACKENDS[r.backend], r.processes, round(sum(r.rows.values()) / r.events, 2),
         *(round(r.rows.get(t, 0) / r.events, 2) for t in tables)]
        for r in results
    ]  # fmt: skip
    print(markdown_table(["backend", "processes", "all rows", *tables], rows))


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """Command-line sizes; the defaults take about two minutes on 2 CPUs."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    p.add_argument("--sessions", type=int, default=100, help="sessions in the backlog")
    p.add_argument("--calls", type=int, default=20, help="tool calls per session")
    p.add_argument("--processes", default="1,2,4", help="worker process counts, comma-separated")
    p.add_argument("--backends", default="sqlite,postgresql", help="comma-separated")
    p.add_argument("--concurrency", type=int, default=8, help="MEMQ_CONCURRENCY per process")
    p.add_argument("--batch", type=int, default=8, help="MEMQ_BATCH_MAX_EVENTS")
    p.add_argument("--workdir", help="where the temporary directory goes (default: the system's)")
    a = p.parse_args(argv)
    backends = [v.strip() for v in a.backends.split(",") if v.strip()]
    if unknown := set(backends) - set(BACKENDS):
        p.error(f"unknown backend(s) {sorted(unknown)}: choose from {', '.join(BACKENDS)}")
    return Config(
        sessions=a.sessions,
        calls=a.calls,
        processes=[int(v) for v in a.processes.split(",")],
        backends=backends,
        concurrency=a.concurrency,
        batch=a.batch,
        workdir=a.workdir,
    )


async def run_all(
    cfg: Config, url: str, observer_url: str, tmp: Path, pg: PostgresServer | None
) -> tuple[list[Result], float]:
    """The publish cost, then every backend and process count one after the other."""
    client = aioredis.Redis.from_url(url)
    try:
        producer = Producer(client, Settings(prefix=PREFIX, max_pending_per_session=1_000_000))
        publish = await publish_cost(client, producer, 1000)
    finally:
        await client.aclose()
    results = [
        await run_config(backend, n, url, observer_url, tmp, cfg, pg)
        for backend in cfg.backends
        if backend == "sqlite" or pg is not None
        for n in cfg.processes
    ]
    return results, publish


def main() -> None:
    cfg = parse_args()
    meter = CpuMeter()
    with (
        tempfile.TemporaryDirectory(prefix="memq-scaling-", dir=cfg.workdir) as name,
        private_postgres() if "postgresql" in cfg.backends else nullcontext(None) as cluster,
    ):
        tmp = Path(name)
        pg = cluster if isinstance(cluster, PostgresServer) else None
        if isinstance(cluster, str):
            progress(f"PostgreSQL {cluster}")
        with private_redis(tmp / "redis") as server, fake_observer() as observer:
            assert server.proc is not None
            results, publish = asyncio.run(run_all(cfg, server.url, observer.url, tmp, pg))
            pg_cpu = cluster_cpu_s(pg) if pg is not None else 0.0
            noise = meter.report([server.proc.pid, observer.proc.pid], extra_s=pg_cpu)
    report(results, cfg, publish, noise, cluster if isinstance(cluster, str) else None)


if __name__ == "__main__":
    main()
