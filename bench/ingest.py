"""Ingest benchmark: publish throughput (1 and 4 producers) and both Claude Code hooks' latency.

Run from the repository root: `.venv/bin/python bench/ingest.py` (about a minute; `--help`
for a hook-only run). It starts its own redis-server on a free loopback port and prints a
markdown table with the machine: the command hook's process wall time beside the HTTP
hook's request time (`memq agent`) at MEMQ-like load (200 requests a second).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import queue
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio as aioredis

from bench.common import CpuMeter, machine, percentile, private_redis
from bench.http_hook import http_hook_times
from pipeline.events import Event, ToolCall, encode_event
from worker.ingest.prepare import PreparedEvent
from worker.ingest.producer import Producer, prepare_event
from worker.keys import Keys
from worker.settings import Settings

SESSIONS = 50
PIPELINED_EVENTS = 4000
ONE_BY_ONE_EVENTS = 1500
HOOK_RUNS = 100
HTTP_RATE = 200  # hook requests a second
HTTP_SECONDS = 5.0
HOOK_SESSION = "bench-hook-session"
_OUTPUT_LINE = "tests/test_cart.py::test_discount_{i}_{j} PASSED in 0.{j:02d}s (cart total 90.00)\n"


def tool_call(i: int, tag: str) -> Event:
    """A ~2 KB tool call: a Bash command and a pytest-like output."""
    output = "".join(_OUTPUT_LINE.format(i=i, j=j) for j in range(22))
    return ToolCall(
        event_id=f"{tag}-{i}",
        memory_session_id=f"bench-{tag}-{i % SESSIONS}",
        project="shop",
        occurred_at=datetime.now(UTC),
        tool_name="Bash",
        tool_input={"command": f"pytest tests/test_cart.py -k discount_{i}", "timeout": 120},
        tool_output=output[:1900],
        cwd="/home/dev/shop",
        tool_use_id=f"toolu_{i}",
    )


def _encode_only(event: Event) -> PreparedEvent:
    return PreparedEvent(event, encode_event(event))


async def _produce(
    url: str, tag: str, count: int, pipelined: bool, scrub: bool, ready: Callable[[], object]
) -> tuple[float, float]:
    settings = Settings(redis_url=url, prefix="bench", max_pending_per_session=1_000_000)
    events = [tool_call(i, tag) for i in range(count)]
    client = aioredis.Redis.from_url(url)
    producer = Producer(client, settings)
    await client.ping()
    ready()  # every producer is connected and has built its events: all start together
    # Without scrubbing, the Redis path alone: what publishing costs once an event is prepared.
    ready_made = None if scrub else [_encode_only(e) for e in events]
    began = time.time()
    prepared = ready_made or [prepare_event(e, settings) for e in events]
    if pipelined:
        await producer.publish_many(prepared)
    else:
        for event in prepared:
            await producer.publish(event)
    ended = time.time()
    await client.aclose()
    return began, ended


def _producer_process(
    url: str, tag: str, count: int, pipelined: bool, scrub: bool, barrier: Any, results: Any
) -> None:
    results.put(asyncio.run(_produce(url, tag, count, pipelined, scrub, barrier.wait)))


def throughput(url: str, producers: int, count: int, pipelined: bool, scrub: bool) -> float:
    """Events per second over all producer processes, from the first start to the last end."""
    tag = f"{'p' if pipelined else 'o'}{'s' if scrub else 'r'}{producers}-{time.monotonic_ns()}"
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(producers), ctx.Queue()
    procs = [
        ctx.Process(
            target=_producer_process,
            args=(url, f"{tag}-{n}", count, pipelined, scrub, barrier, results),
        )
        for n in range(producers)
    ]
    for proc in procs:
        proc.start()
    spans: list[tuple[float, float]] = []
    while len(spans) < producers:
        try:
            spans.append(results.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                for proc in procs:
                    proc.kill()
                raise SystemExit("a producer process failed (see its traceback above)") from None
    for proc in procs:
        proc.join()
    return producers * count / (max(e for _, e in spans) - min(b for b, _ in spans))


def prepare_cost_us() -> float:
    """CPU cost of prepare_event (strip private regions, redact secrets, cap) per 2 KB event."""
    settings = Settings()
    events = [tool_call(i, "prep") for i in range(300)]
    started = time.perf_counter()
    for event in events:
        prepare_event(event, settings)
    return (time.perf_counter() - started) / len(events) * 1e6


def hook_times(
    url: str, data_dir: Path, runs: int, payload: Callable[[int], str], *, no_site: bool = False
) -> tuple[list[float], list[float]]:
    """Wall and CPU time of whole `memq hook claude-code` processes, as the agent host sees them.

    `no_site` runs `python -S` with an explicit PYTHONPATH instead of the console script: no
    .pth files, so no import hook of this checkout's editable install (a wheel has none).
    """
    command = [str(Path(sys.executable).parent / "memq"), "hook", "claude-code"]
    extra: dict[str, str] = {}
    if no_site:
        code = "from worker.cli.entry import main; main()"
        command = [sys.executable, "-S", "-c", code, "hook", "claude-code"]
        site_packages = next(p for p in sys.path if p.endswith("site-packages"))
        extra["PYTHONPATH"] = f"{Path(__file__).resolve().parent.parent}:{site_packages}"
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(data_dir),
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_REDIS_URL": url,
        "MEMQ_PREFIX": "bench",
        # An installed memq has compiled bytecode; keep it out of the repository.
        "PYTHONPYCACHEPREFIX": str(data_dir / "pycache"),
        **extra,
    }
    if not no_site and os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]  # a worktree's code, not the installed one
    times, cpu = [], []
    for i in range(-2, runs):  # two warm-up runs fill the bytecode cache
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, input=payload(i), env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # stderr: it spooled (a warm-up run may, while it compiles every module's bytecode)
        if i >= 0 and (done.returncode != 0 or done.stdout or done.stderr):
            raise SystemExit(f"hook run failed: {done.returncode} {done.stdout} {done.stderr}")
        if i >= 0:
            times.append(elapsed)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return times, cpu


def post_tool_use(i: int) -> str:
    return json.dumps({
        "session_id": HOOK_SESSION,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/home/dev/shop",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"pytest -k case_{i}"},
        "tool_response": {"stdout": "".join(_OUTPUT_LINE.format(i=i, j=j) for j in range(20)),
                          "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_bench_{i}_{time.monotonic_ns()}",
    })  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hook-only", action="store_true", help="Skip the throughput runs.")
    parser.add_argument(
        "--hook-runs",
        type=int,
        default=HOOK_RUNS,
        help=f"Hook processes timed (default {HOOK_RUNS}).",
    )
    parser.add_argument(
        "--http-rate", type=float, default=HTTP_RATE, help=f"HTTP hook requests/s ({HTTP_RATE})."
    )
    parser.add_argument(
        "--http-seconds", type=float, default=HTTP_SECONDS, help=f"HTTP load ({HTTP_SECONDS} s)."
    )
    options = parser.parse_args()
    meter = CpuMeter()
    with (
        tempfile.TemporaryDirectory(prefix="mqbench") as tmp,
        private_redis(Path(tmp) / "redis") as server,
    ):
        rows = []
        for producers in () if options.hook_only else (1, 4):
            for pipelined, count in ((True, PIPELINED_EVENTS), (False, ONE_BY_ONE_EVENTS)):
                for scrub in (True, False):
                    rate = throughput(server.url, producers, count, pipelined, scrub)
                    mode = "`publish_many`, pipelined" if pipelined else "`publish`, one by one"
                    what = "full producer" if scrub else "Redis path only (no scrubbing)"
                    rows.append(f"| {mode} | {producers} | {what} | {rate:,.0f} events/s |")
        if not options.hook_only:
            prep = prepare_cost_us()
            rows.append(
                f"| `prepare_event` CPU per 2 KB tool call | 1 | strip + redact + cap "
                f"| {prep:,.0f} µs |"
            )
        runs = options.hook_runs
        hook = hook_times(server.url, Path(tmp) / "hook", runs, post_tool_use)
        bare = hook_times(server.url, Path(tmp) / "hook", runs, post_tool_use, no_site=True)
        before = asyncio.run(_stream_length(server.url))
        http = http_hook_times(
            server.url,
            Path(tmp) / "agent",
            rate=options.http_rate,
            seconds=options.http_seconds,
            payload=post_tool_use,
        )
        landed = asyncio.run(_stream_length(server.url)) - before - 20  # 20 warm-up requests
    print(f"Machine: {machine()}; {meter.report()}\n")
    print("| measurement | producers | path | result |")
    print("|---|---|---|---|")
    for row in rows:
        print(row)
    for label, (times, cpu) in (
        ("console script (editable install)", hook),
        ("`python -S`, no .pth import hooks", bare),
    ):
        print(
            f"| `memq hook claude-code` wall time, {len(times)} runs | 1 | {label}, Redis up | "
            f"p50 {percentile(times, 50) * 1000:.0f} ms, p99 {percentile(times, 99) * 1000:.0f} ms"
            f" (CPU p50 {percentile(cpu, 50) * 1000:.0f} ms) |"
        )
    n, rate = len(http.hook), options.http_rate
    print(
        f"| HTTP hook request (`memq agent`), {n} at {rate:g}/s | 1 | new connection each, "
        f"Redis up; {landed} of {n} events in Redis | p50 {percentile(http.hook, 50) * 1000:.1f}"
        f" ms, p99 {percentile(http.hook, 99) * 1000:.1f} ms (agent CPU "
        f"{http.cpu_ms_per_request:.2f} ms per request) |"
    )
    print(
        f"| `GET /healthz` of the same agent, {n} at {rate:g}/s | 1 | does nothing: what the "
        f"machine and HTTP add | p50 {percentile(http.baseline, 50) * 1000:.1f} ms, "
        f"p99 {percentile(http.baseline, 99) * 1000:.1f} ms |"
    )


async def _stream_length(url: str) -> int:
    client = aioredis.Redis.from_url(url)
    try:
        return int(await client.xlen(Keys("bench").events(HOOK_SESSION)))
    finally:
        await client.aclose()


if __name__ == "__main__":
    main()
