"""Shared bench helpers: machine line, CPU noise, tables, private Redis, fake observer, workers."""

from __future__ import annotations

import asyncio
import os
import platform
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio as aioredis

from tests.support.redis_server import RedisServer
from worker.keys import Keys

REPO = Path(__file__).resolve().parent.parent
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_STARTED = time.monotonic()  # the bench's start: bench/common is among its first imports


def progress(message: str) -> None:
    """A progress line on stderr, timed from the bench's start (stdout carries only tables)."""
    print(f"[{time.monotonic() - _STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


def machine() -> str:
    """One line naming the CPU, Python, redis-server and kernel."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        done = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, check=False
        )
        redis_version = done.stdout.split()[2].removeprefix("v=")
    except (OSError, IndexError):
        redis_version = "unknown"
    return (
        f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
        f"redis-server {redis_version}, {platform.system()} {platform.release()}"
    )


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values; NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table; numbers right-aligned."""
    align = [
        "---:" if rows and isinstance(rows[0][i], int | float) else "---"
        for i in range(len(headers))
    ]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(_cell(v) for v in row) + " |" for row in rows),
    ]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _busy_seconds() -> float:
    # /proc/stat's first line: user nice system idle iowait irq softirq steal ...
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / _CLOCK_TICKS


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a live process has used (0 when it is gone)."""
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(parts[11]) + int(parts[12])) / _CLOCK_TICKS  # utime, stime


def _own_seconds(live_children: Sequence[int]) -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    done = resource.getrusage(resource.RUSAGE_CHILDREN)  # children already waited for
    total = own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime
    return total + sum(process_cpu_s(pid) for pid in live_children)


class CpuMeter:
    """How busy the machine was while the bench ran, split into ours and everyone else's."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.load_before = os.getloadavg()[0]
        self._busy0 = _busy_seconds()
        self._own0 = _own_seconds(())

    def report(self, live_children: Sequence[int] = (), extra_s: float = 0.0) -> str:
        """One line: average CPUs used by other processes and by the bench's own processes.

        extra_s: CPU seconds of the bench's processes that are not its children (a server
        that daemonized, e.g. a PostgreSQL cluster started by pg_ctl).
        """
        wall = time.monotonic() - self.started
        busy = _busy_seconds() - self._busy0
        own = _own_seconds(live_children) - self._own0 + extra_s
        others = max(0.0, busy - own)
        return (
            f"over {wall:.0f} s the bench's processes used {own / wall:.2f} CPUs on average and "
            f"other processes {others / wall:.2f} CPUs (of {os.cpu_count()}); load average "
            f"{self.load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
        )


@contextmanager
def private_redis(workdir: Path) -> Iterator[RedisServer]:
    """A redis-server on a free loopback port (never 6379), stopped afterwards."""
    server = RedisServer(workdir).start()
    if server.port == 6379:
        server.stop()
        raise RuntimeError("refusing to bench against port 6379 (the shared Redis)")
    try:
        yield server
    finally:
        server.stop()


# The fake observer gets a process of its own, so its HTTP threads never compete for the
# bench's GIL (which would inflate the latencies the bench measures).
_SERVE_OBSERVER = """
import sys
from tests.support.fake_observer import FakeObserver, slow_observer
fake = FakeObserver()
if sys.argv[3:] == ["keyed"]:
    from bench.latency import keyed_observer
    fake.responder = keyed_observer(float(sys.argv[1]), float(sys.argv[2]))
elif len(sys.argv) > 1:
    fake.responder = slow_observer(float(sys.argv[1]), float(sys.argv[2]))
print(fake.url, flush=True)
sys.stdin.read()
fake.close()
"""


class ObserverProcess:
    """The loopback fake observer (`deterministic_reply`, at once or delayed) in a child process."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url


@contextmanager
def fake_observer(
    latency_s: tuple[float, float] | None = None, keyed: bool = False
) -> Iterator[ObserverProcess]:
    """Start the fake observer in its own process (answering after a uniform `latency_s`
    range when given, else at once; `keyed`: a delay the bench can compute from the turn's
    last token, `bench.latency.token_delay_s`); stopped afterwards."""
    delay = [str(v) for v in latency_s] if latency_s else []
    delay += ["keyed"] if keyed and latency_s else []
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE_OBSERVER, *delay],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        proc.wait()
        raise RuntimeError("the fake observer process did not start (see its stderr above)")
    try:
        yield ObserverProcess(proc, url)
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def worker_env(redis_url: str, observer_url: str, data_dir: Path, **memq: object) -> dict[str, str]:
    """An explicit `memq worker` environment: private Redis, the fake observer, a temp data dir.

    `memq` adds MEMQ_* settings by field name (`batch_max_events=8` → MEMQ_BATCH_MAX_EVENTS).
    """
    # A worktree run (PYTHONPATH=$PWD) benches that tree's workers, not the install's.
    tree = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return {
        **tree,
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(data_dir),
        # Never write bytecode into the checkout; read what the install already compiled.
        "PYTHONDONTWRITEBYTECODE": "1",
        "MEMQ_REDIS_URL": redis_url,
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_OBSERVER": "anthropic",
        "ANTHROPIC_API_KEY": "x",
        "ANTHROPIC_BASE_URL": observer_url,
        "MEMQ_MODEL": "bench-model",
        # Throughput benches time how fast work drains: every turn due at once (a live
        # session's turns wait for their batch to fill; bench/tokens.py measures that).
        "MEMQ_BATCH_MAX_WAIT_S": "0",
        **{f"MEMQ_{name.upper()}": str(value) for name, value in memq.items()},
    }


class WorkerProcesses:
    """`memq worker` OS processes, each writing its log to a file."""

    def __init__(self, count: int, env: dict[str, str], logs: Path) -> None:
        memq = str(Path(sys.executable).parent / "memq")
        logs.mkdir(parents=True, exist_ok=True)
        self.logs = [logs / f"worker-{n}.log" for n in range(count)]
        self.procs: list[subprocess.Popen[bytes]] = []
        for log in self.logs:
            with log.open("wb") as err:
                self.procs.append(
                    subprocess.Popen(
                        [memq, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=err
                    )
                )

    def check_alive(self) -> None:
        """Stop the bench with the log's tail when a worker process has exited."""
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise SystemExit(f"memq worker exited with code {proc.returncode}:\n{tail}")

    def cpu_seconds(self) -> float:
        """User + system CPU the worker processes have used so far."""
        return sum(process_cpu_s(p.pid) for p in self.procs)

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


async def stored(client: aioredis.Redis, keys: Keys) -> int:
    """Rows the workers report stored (or deduplicated) so far."""
    values = await cast(
        Awaitable[list[bytes | None]], client.hmget(keys.outcomes, ["stored", "deduplicated"])
    )
    return sum(int(v or 0) for v in values)


async def other_outcomes(client: aioredis.Redis, keys: Keys) -> dict[str, int]:
    """Outcomes other than stored: any of them makes the run suspect."""
    raw = await cast(Awaitable[dict[bytes, bytes]], client.hgetall(keys.outcomes))
    counts = {k.decode(): int(v) for k, v in raw.items()}
    return {k: v for k, v in counts.items() if k not in ("stored", "deduplicated") and v}


async def wait_stored(
    client: aioredis.Redis, keys: Keys, target: int, workers: WorkerProcesses, timeout_s: float
) -> float:
    """Poll every 10 ms until `target` rows are stored; the monotonic time it happened."""
    deadline = time.monotonic() + timeout_s
    while (count := await stored(client, keys)) < target:
        if time.monotonic() > deadline:
            raise SystemExit(
                f"only {count} of {target} rows stored after {timeout_s:.0f}s; other outcomes: "
                f"{await other_outcomes(client, keys)}; worker logs: {workers.logs[0].parent}"
            )
        workers.check_alive()
        await asyncio.sleep(0.01)
    return time.monotonic()


def count_rows(data_dir: Path, table: str, tag: str) -> int:
    """Rows of a table for one phase's sessions (their ids start with the tag)."""
    with sqlite3.connect(data_dir / "memq.db") as db:
        sql = f"SELECT count(*) FROM {table} WHERE memory_session_id LIKE ?"
        return int(db.execute(sql, (f"{tag}-%",)).fetchone()[0])
