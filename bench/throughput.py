"""Throughput bench: events/s stored end to end by `memq worker` processes, and broadcast latency.

Run from the repository root: `.venv/bin/python bench/throughput.py` (about two minutes with the
defaults; `--help` for the sizes). It starts a private redis-server on a free loopback port and
the loopback fake observer (an instant observer: `deterministic_reply`) in a process of its own,
then for each (worker processes, batch size): starts the `memq worker` processes, warms them
up, publishes every event up front and times publish → stored in SQLite (counted by the workers'
`<prefix>:stats:outcomes` hash, checked against the SQLite file afterwards), then publishes at a
steady fraction of that rate and measures publish → `<prefix>:observations` pub/sub latency.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import redis.asyncio as aioredis

from bench.common import (
    CpuMeter,
    fake_observer,
    machine,
    markdown_table,
    percentile,
    private_redis,
    process_cpu_s,
)
from pipeline.events import ToolCall
from worker.keys import Keys
from worker.producer import Producer
from worker.settings import Settings

PREFIX = "bench"
_TOKEN = re.compile(r"\bL(\d{8})\b")
_OUTPUT_LINE = "tests/test_cart.py::test_discount_{s}_{j} PASSED [{p:3d}%] in 0.0{d}s cart=90.00\n"


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
    latency_fraction: float
    latency_sessions: int
    workdir: str | None


class Throughput(msgspec.Struct, frozen=True, kw_only=True):
    """One timed drain of a published backlog."""

    processes: int
    batch: int
    events: int
    publish_s: float
    seconds: float
    calls: int  # observer requests, to show the batch sizes actually reached

    @property
    def rate(self) -> float:
        return self.events / self.seconds


class Latency(msgspec.Struct, frozen=True, kw_only=True):
    """Publish → broadcast latencies at a steady publishing rate."""

    processes: int
    batch: int
    target_rate: float
    achieved_rate: float
    latencies_ms: list[float]
    missing: int
    calls: int


class Tokens:
    """Hands out unique command tokens and remembers when each was published."""

    def __init__(self) -> None:
        self.next = 0
        self.published: dict[int, float] = {}

    def take(self) -> int:
        self.next += 1
        return self.next


_STARTED = time.monotonic()


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries only the tables)."""
    print(f"[{time.monotonic() - _STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


def tool_call(session: str, n: int, token: int, output_chars: int) -> ToolCall:
    """A ~2 KB Bash call; the token opens the command, so it shows in the observation's title."""
    lines = (_OUTPUT_LINE.format(s=session, j=j, p=j % 100, d=j % 10) for j in range(200))
    output = "".join(lines)[:output_chars]
    return ToolCall(
        event_id=f"{session}-{n}-{token}",
        memory_session_id=session,
        project="shop",
        occurred_at=datetime.now(UTC),
        tool_name="Bash",
        tool_input={"command": f"L{token:08d} pytest tests/test_cart.py -k discount_{n}"},
        tool_output={"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
        cwd="/home/dev/shop",
    )


def interleaved(
    tag: str, sessions: int, calls: int, tokens: Tokens, output_chars: int
) -> list[ToolCall]:
    """calls events for each session, published round-robin (as concurrent agents would)."""
    return [
        tool_call(f"{tag}-s{s}", n, tokens.take(), output_chars)
        for n in range(calls)
        for s in range(sessions)
    ]


def worker_env(
    url: str, observer_url: str, data_dir: Path, batch: int, cfg: Config
) -> dict[str, str]:
    """The explicit environment of a `memq worker` process (nothing inherited but PATH)."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(data_dir),
        "MEMQ_REDIS_URL": url,
        "MEMQ_PREFIX": PREFIX,
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_OBSERVER": "anthropic",
        "ANTHROPIC_API_KEY": "x",
        "ANTHROPIC_BASE_URL": observer_url,
        "MEMQ_MODEL": "bench-model",
        "MEMQ_BATCH_WAIT_MS": str(cfg.batch_wait_ms),
        "MEMQ_BATCH_MAX_EVENTS": str(batch),
        "MEMQ_CONCURRENCY": str(cfg.concurrency),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


class Workers:
    """`memq worker` OS processes, stderr to a log file each."""

    def __init__(self, count: int, env: dict[str, str], logs: Path) -> None:
        memq = str(Path(sys.executable).parent / "memq")
        logs.mkdir(parents=True, exist_ok=True)
        self.logs = [logs / f"worker-{n}.log" for n in range(count)]
        self.procs = []
        for log in self.logs:
            with log.open("w") as err:
                self.procs.append(
                    subprocess.Popen(
                        [memq, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=err
                    )
                )

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def check_alive(self) -> None:
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                tail = log.read_text()[-2000:]
                raise SystemExit(f"memq worker exited with {proc.returncode}:\n{tail}")

    def cpu_seconds(self) -> float:
        """User + system CPU the live worker processes have used so far."""
        return sum(process_cpu_s(pid) for pid in self.pids)

    def stop(self, grace_s: float = 5.0) -> int:
        """SIGTERM, then SIGKILL after grace_s; returns how many needed the SIGKILL."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        killed = 0
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                killed += 1
        return killed


async def stored(client: aioredis.Redis) -> int:
    """Rows the workers report stored (or deduplicated) so far."""
    values = await client.hmget(Keys(PREFIX).outcomes, ["stored", "deduplicated"])
    return sum(int(v or 0) for v in values)


async def failures(client: aioredis.Redis) -> dict[str, int]:
    """Outcomes other than stored: any of them makes the run suspect."""
    raw = await client.hgetall(Keys(PREFIX).outcomes)
    counts = {k.decode(): int(v) for k, v in raw.items()}
    return {k: v for k, v in counts.items() if k not in ("stored", "deduplicated") and v}


async def wait_stored(
    client: aioredis.Redis, target: int, workers: Workers, timeout_s: float
) -> float:
    """Poll until `target` rows are stored; returns the monotonic time it happened."""
    deadline = time.monotonic() + timeout_s
    while True:
        if await stored(client) >= target:
            return time.monotonic()
        if time.monotonic() > deadline:
            got = await stored(client)
            raise SystemExit(
                f"only {got} of {target} rows stored after {timeout_s:.0f}s; "
                f"other outcomes: {await failures(client)}; logs in {workers.logs[0].parent}"
            )
        workers.check_alive()
        await asyncio.sleep(0.01)


async def drain_backlog(
    producer: Producer, client: aioredis.Redis, workers: Workers, events: list[ToolCall]
) -> tuple[float, float]:
    """Publish every event up front; (publish seconds, publish start → all stored seconds)."""
    base = await stored(client)
    started = time.monotonic()
    await producer.publish_many(events)
    published = time.monotonic()
    done = await wait_stored(client, base + len(events), workers, timeout_s=300)
    return published - started, done - started


async def steady_latency(
    producer: Producer,
    client: aioredis.Redis,
    workers: Workers,
    events: list[ToolCall],
    rate: float,
    tokens: Tokens,
) -> tuple[list[float], int, float]:
    """Publish at `rate` events/s; latencies (ms) to each row's broadcast, missing, achieved rate."""
    received: dict[int, float] = {}
    pubsub = client.pubsub()
    await pubsub.subscribe(Keys(PREFIX).observations)
    await pubsub.get_message(timeout=1.0)  # the subscribe confirmation

    async def listen() -> None:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is None:
                continue
            now = time.perf_counter()
            title = msgspec.json.decode(message["data"]).get("title") or ""
            match = _TOKEN.search(title)
            if match:
                received[int(match[1])] = now

    listener = asyncio.create_task(listen())
    wanted = [_token_of(e) for e in events]
    started = time.perf_counter()
    sent = 0
    while sent < len(events):
        due = min(len(events), int((time.perf_counter() - started) * rate) + 1)
        if due > sent:
            now = time.perf_counter()
            for token in wanted[sent:due]:
                tokens.published[token] = now
            await producer.publish_many(events[sent:due])
            sent = due
        await asyncio.sleep(0.002)
    achieved = len(events) / (time.perf_counter() - started)
    deadline = time.monotonic() + 15
    while len(received) < len(wanted) and time.monotonic() < deadline:
        workers.check_alive()
        await asyncio.sleep(0.05)
    listener.cancel()
    await asyncio.gather(listener, return_exceptions=True)
    await pubsub.aclose()
    latencies = [(received[t] - tokens.published[t]) * 1000 for t in wanted if t in received]
    return latencies, len(wanted) - len(latencies), achieved


def _token_of(event: ToolCall) -> int:
    match = _TOKEN.search(event.tool_input["command"])
    assert match is not None
    return int(match[1])


def observer_calls(data_dir: Path, tag: str) -> int:
    """Observer requests the workers made for a phase's sessions (one token_usage row each)."""
    with sqlite3.connect(data_dir / "memq.db") as db:
        (count,) = db.execute(
            "SELECT count(*) FROM token_usage WHERE memory_session_id LIKE ?", (f"{tag}-%",)
        ).fetchone()
        return int(count)


def stored_in_sqlite(data_dir: Path, tag: str) -> int:
    """Processed events of a phase's sessions, as the SQLite file has them."""
    with sqlite3.connect(data_dir / "memq.db") as db:
        (count,) = db.execute(
            "SELECT count(*) FROM processed_events WHERE memory_session_id LIKE ?", (f"{tag}-%",)
        ).fetchone()
        return int(count)


async def run_config(
    processes: int, batch: int, url: str, observer_url: str, tmp: Path, cfg: Config, tokens: Tokens
) -> tuple[Throughput, Latency | None, list[int]]:
    """Start the workers, warm up, time the backlog drain, then the steady-rate latency."""
    name = f"p{processes}b{batch}"
    data_dir = tmp / name
    client = aioredis.Redis.from_url(url)
    await client.flushall()
    settings = Settings(redis_url=url, prefix=PREFIX, max_pending_per_session=1_000_000)
    producer = Producer(client, settings)
    workers = Workers(
        processes, worker_env(url, observer_url, data_dir, batch, cfg), tmp / "logs" / name
    )
    pids = workers.pids
    try:
        warm = interleaved(f"{name}-warm", cfg.concurrency * processes, 2, tokens, cfg.output_chars)
        await producer.publish_many(warm)
        await wait_stored(client, len(warm), workers, timeout_s=120)
        progress(f"{name}: workers up and warm")

        events = interleaved(f"{name}-tp", cfg.sessions, cfg.calls, tokens, cfg.output_chars)
        publish_s, seconds = await drain_backlog(producer, client, workers, events)
        progress(f"{name}: drained {len(events)} events in {seconds:.2f} s")
        latency = None
        if cfg.latency_s > 0:
            rate = cfg.latency_fraction * len(events) / seconds
            count = max(1, int(rate * cfg.latency_s))
            steady = [
                tool_call(
                    f"{name}-lat-s{i % cfg.latency_sessions}", i, tokens.take(), cfg.output_chars
                )
                for i in range(count)
            ]
            latencies, missing, achieved = await steady_latency(
                producer, client, workers, steady, rate, tokens
            )
        bad = await failures(client)
        if bad:
            print(f"warning: {name}: outcomes other than stored: {bad}", file=sys.stderr)
        progress(f"{name}: latency run done")
    finally:
        workers.stop()
        await client.aclose()
        progress(f"{name}: workers stopped")
    if stored_in_sqlite(data_dir, f"{name}-tp") != len(events):
        raise SystemExit(f"{name}: SQLite holds fewer processed events than were counted stored")
    throughput = Throughput(
        processes=processes,
        batch=batch,
        events=len(events),
        publish_s=publish_s,
        seconds=seconds,
        calls=observer_calls(data_dir, f"{name}-tp"),
    )
    if cfg.latency_s > 0:
        latency = Latency(
            processes=processes,
            batch=batch,
            target_rate=rate,
            achieved_rate=achieved,
            latencies_ms=latencies,
            missing=missing,
            calls=observer_calls(data_dir, f"{name}-lat"),
        )
    return throughput, latency, pids


def report(results: Sequence[tuple[Throughput, Latency | None]], cfg: Config, noise: str) -> None:
    """Print the machine, the throughput table, the latency table and the run's noise."""
    print(f"Machine: {machine()}")
    print(
        "The fake observer, redis-server, the bench process (publisher and subscriber) and the "
        f"workers all share these {os.cpu_count()} CPUs; {noise}.\n"
    )
    one = {t.batch: t.rate for t, _ in results if t.processes == 1}
    rows: list[list[Any]] = []
    for t, _ in results:
        scaling = f"{t.rate / one[t.batch]:.2f}×" if t.batch in one else "—"
        rows.append([
            t.processes, t.batch, t.events, round(t.publish_s, 2), round(t.seconds, 2),
            round(t.rate), round(t.rate / t.processes), scaling, round(t.events / t.calls, 2),
        ])  # fmt: skip
    print(
        f"Backlog drain: {cfg.sessions} sessions × {cfg.calls} tool calls of ~"
        f"{cfg.output_chars / 1000:.0f} KB, published up front (`Producer.publish_many`), "
        f"timed from the first publish until every event is stored; "
        f"MEMQ_CONCURRENCY={cfg.concurrency}, MEMQ_BATCH_WAIT_MS={cfg.batch_wait_ms}.\n"
    )
    headers = ["processes", "batch", "events", "publish s", "seconds", "events/s",
               "events/s per process", "vs 1 process", "events per observer call"]  # fmt: skip
    print(markdown_table(headers, rows))
    latency_rows: list[list[Any]] = []
    for _, lat in results:
        if lat is None:
            continue
        ms = lat.latencies_ms
        latency_rows.append([
            lat.processes, lat.batch, round(lat.target_rate), round(lat.achieved_rate), len(ms),
            round(percentile(ms, 50), 1), round(percentile(ms, 99), 1), round(max(ms, default=0), 1),
            lat.missing, round(len(ms) / lat.calls, 2) if lat.calls else 0,
        ])  # fmt: skip
    if latency_rows:
        print(
            f"\nPublish → broadcast latency at {cfg.latency_fraction:.0%} of each configuration's "
            f"drain rate, {cfg.latency_s:g} s of steady publishing over {cfg.latency_sessions} "
            "sessions (publish time taken before the call; receive time when the bench's "
            f"`{PREFIX}:observations` subscriber reads the message).\n"
        )
        headers = ["processes", "batch", "target events/s", "published events/s", "events",
                   "p50 ms", "p99 ms", "max ms", "missing", "events per observer call"]  # fmt: skip
        print(markdown_table(headers, latency_rows))


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """Command-line sizes; the defaults fit in about two minutes on 2 CPUs."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sessions", type=int, default=200, help="sessions in the backlog")
    p.add_argument("--calls", type=int, default=20, help="tool calls per session")
    p.add_argument("--output-chars", type=int, default=2000, help="tool output size")
    p.add_argument("--processes", default="1,2", help="worker process counts, comma-separated")
    p.add_argument("--batches", default="1,8", help="MEMQ_BATCH_MAX_EVENTS values")
    p.add_argument("--concurrency", type=int, default=16, help="MEMQ_CONCURRENCY per process")
    p.add_argument("--batch-wait-ms", type=int, default=0, help="MEMQ_BATCH_WAIT_MS")
    p.add_argument("--latency-seconds", type=float, default=8, help="0 skips the latency runs")
    p.add_argument("--latency-fraction", type=float, default=0.5, help="of the drain rate")
    p.add_argument("--latency-sessions", type=int, default=200)
    p.add_argument("--workdir", help="parent of the temporary directory (default: the system's)")
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
        latency_fraction=a.latency_fraction,
        latency_sessions=a.latency_sessions,
        workdir=a.workdir,
    )


async def run(
    cfg: Config, url: str, observer_url: str, tmp: Path, live: list[int]
) -> list[tuple[Throughput, Latency | None]]:
    tokens = Tokens()
    results = []
    for processes in cfg.processes:
        for batch in cfg.batches:
            t, lat, pids = await run_config(processes, batch, url, observer_url, tmp, cfg, tokens)
            results.append((t, lat))
            print(
                f"{processes} process(es), batch {batch}: {t.rate:,.0f} events/s", file=sys.stderr
            )
    return results


def main() -> None:
    cfg = parse_args()
    meter = CpuMeter()
    with tempfile.TemporaryDirectory(prefix="mqbench", dir=cfg.workdir) as name:
        tmp = Path(name)
        with private_redis(tmp / "redis") as server, fake_observer() as observer:
            assert server.proc is not None
            live = [server.proc.pid, observer.proc.pid]
            results = asyncio.run(run(cfg, server.url, observer.url, tmp, live))
            noise = meter.report(live)
    report(results, cfg, noise)


if __name__ == "__main__":
    main()
