"""A memq fleet under faults at live pace: what is published, stored, dropped, dead-lettered,
lost and duplicated per fault, publish -> stored latency beside a 1-2 s observer, and what
each worker and Redis spend.

    .venv/bin/python bench/fleet.py [--seconds 20] [--rate 4] [--workers 2] [--hosts 2]
                                    [--faults none,worker-kill,agent-kill]

Each fault gets a fresh fleet (tests/support/fleet.py): `--workers` `memq worker` processes,
each with its own data dir, on a private PostgreSQL database, a private Redis and a Chroma
server (the workers embed with the hash embedding); `--hosts` agent hosts, each with its own
data dir, spool and `memq agent`, publishing Claude Code tool calls through the real command
hook at `--rate` calls a second for `--seconds`; the fake observer answers in 1-2 s. A third
of the way into the load the fault is injected:

* none: nothing;
* worker-kill: worker 0 is killed with SIGKILL while a turn of its waits on the observer,
  and started again at once (its turn is retaken once arq lets go of the job: ~19 s);
* agent-kill: host 0's `memq agent` is killed with SIGKILL right after a hook it answered,
  and started again 3 s later (meanwhile the hooks publish by themselves);
* chroma-kill: the Chroma server is killed with SIGKILL and started again 5 s later on the
  same port and directory (storage goes on; the vector queue grows, then drains);
* postgres-restart: PostgreSQL is stopped (`pg_ctl stop -m fast`) and started again 5 s
  later (turns wait for it without counting attempts).

After the load the bench waits until every published call is processed or dead-lettered and
the vector outbox has drained, then reads the accounting back from PostgreSQL, Redis and
Chroma. Latency runs from the hook's exit to the event's processed_at. CPU is counted from
the load's start until the accounting (/proc): each worker slot's (a restarted worker's
start-up included, the first start-up not), and the redis-server's, idle polling included,
per published call.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CpuMeter, machine, markdown_table, process_cpu_s, progress
from tests.support.fake_observer import FakeObserver
from tests.support.fleet import Fleet
from tests.support.fleet_accounting import FleetReport
from tests.support.fleet_load import LoadResult, next_publish
from tests.support.ports import free_port, wait_for_port
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisServer

AGENT_DOWN_S = 3.0
SERVER_DOWN_S = 5.0  # how long the Chroma server or PostgreSQL stays down
HEADERS = [
    "fault", "published", "stored", "dropped", "dead", "lost", "duplicated", "out of order",
    "without vectors", "p50 ms", "p99 ms", "hook p50 ms", "worker CPU s", "worker CPU ms/call",
    "Redis CPU ms/call", "run s",
]  # fmt: skip


class Servers:
    """The servers of one fault's fleet; the fault reaches them through here."""

    def __init__(self, root: Path, postgres: PostgresServer, database_url: str) -> None:
        self.root = root
        self.postgres = postgres
        self.database_url = database_url
        self.redis = RedisServer(root / "redis", appendonly=True).start()
        self.chroma_port = free_port()
        self.chroma: subprocess.Popen[bytes] | None = None
        self.start_chroma()

    @property
    def chroma_url(self) -> str:
        return f"http://127.0.0.1:{self.chroma_port}"

    def start_chroma(self) -> None:
        """`chroma run` on its port and directory, as the deploy files run it."""
        log = (self.root / "chroma.log").open("ab")
        self.chroma = subprocess.Popen(
            ["chroma", "run", "--host", "127.0.0.1", "--port", str(self.chroma_port),
             "--path", str(self.root / "chroma")],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        log.close()
        wait_for_port(self.chroma_port, 60)

    async def redis_cpu_s(self) -> float | None:
        """The redis-server processes' CPU seconds so far."""
        proc = self.redis.proc
        return None if proc is None else process_cpu_s(proc.pid)

    def stop(self) -> None:
        if self.chroma is not None:
            self.chroma.kill()
            self.chroma.wait(10)
        self.redis.stop()


Fault = Callable[[Fleet, Servers, LoadResult], Awaitable[str]]


async def no_fault(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    return "no fault"


async def worker_kill(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    killed = await asyncio.to_thread(fleet.kill_worker_mid_turn, 0, timeout_s=30)
    return "worker 0 killed mid-turn" if killed else "worker 0 had no turn in flight: not killed"


async def agent_kill(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    await next_publish(progress_, host=0)
    await asyncio.to_thread(fleet.kill_agent, 0)
    spooled = fleet.hosts[0].spooled_lines()
    await asyncio.sleep(AGENT_DOWN_S)
    await asyncio.to_thread(fleet.restart_agent, 0)
    return f"host 0's agent killed ({spooled} call(s) in its spool), back {AGENT_DOWN_S:.0f} s on"


async def chroma_kill(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    assert servers.chroma is not None
    await asyncio.to_thread(servers.chroma.kill)
    await asyncio.to_thread(servers.chroma.wait, 10)
    killed = time.monotonic()
    await asyncio.sleep(SERVER_DOWN_S)
    queued = await _pending_vectors(servers.database_url)
    await asyncio.to_thread(servers.start_chroma)  # the same port and directory
    back = time.monotonic()
    empty = await _first_empty_queue(servers.database_url, timeout_s=120)
    warned = _log_count(fleet, "vector index unavailable")
    return (
        f"Chroma server killed (SIGKILL), back {back - killed:.1f} s on with {queued} rows"
        f" queued; the queue first empty {empty} after; 'index unavailable' lines {warned}"
    )


async def postgres_restart(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    await asyncio.to_thread(servers.postgres.halt)  # pg_ctl stop -m fast: clients cut off
    stopped = time.monotonic()
    await asyncio.sleep(SERVER_DOWN_S)
    await asyncio.to_thread(servers.postgres.resume)
    waits = _log_count(fleet, "● 'store-down'")
    warned = _log_count(fleet, "store unreachable:")
    return (
        f"PostgreSQL stopped, back {time.monotonic() - stopped:.1f} s on; session jobs that"
        f" waited for it {waits}; 'store unreachable' lines {warned}"
    )


async def _pending_vectors(database_url: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        n = await conn.fetchval("SELECT count(*) FROM vector_outbox WHERE state = 'pending'")
    finally:
        await conn.close()
    return int(n)


async def _first_empty_queue(database_url: str, *, timeout_s: float) -> str:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await _pending_vectors(database_url) == 0:
            return f"{time.monotonic() - started:.1f} s"
        await asyncio.sleep(0.25)
    return f"never within {timeout_s:.0f} s"


def _log_count(fleet: Fleet, text: str) -> int:
    logs = (fleet.workdir / "logs").glob("worker-*.log")
    return sum(path.read_text(errors="replace").count(text) for path in logs)


FAULTS: dict[str, Fault] = {
    "none": no_fault,
    "worker-kill": worker_kill,
    "agent-kill": agent_kill,
    "chroma-kill": chroma_kill,
    "postgres-restart": postgres_restart,
}


async def run_fault(
    name: str,
    root: Path,
    postgres: PostgresServer,
    observer: FakeObserver,
    args: argparse.Namespace,
) -> tuple[FleetReport, str, float]:
    """One fresh fleet, one load with the fault a third of the way in, its accounting."""
    database_url = await postgres.create_database()
    servers = Servers(root / name, postgres, database_url)
    started = time.monotonic()
    try:
        async with Fleet(
            root / name / "fleet",
            redis_url=servers.redis.url,
            database_url=database_url,
            observer=observer,
            chroma=servers.chroma_url,
            workers=args.workers,
            hosts=args.hosts,
            redis_cpu=servers.redis_cpu_s,
        ) as fleet:
            watch = LoadResult()
            load = asyncio.create_task(fleet.load(seconds=args.seconds, rate=args.rate, into=watch))
            await asyncio.sleep(args.seconds / 3)
            what = await FAULTS[name](fleet, servers, watch)
            progress(f"{name}: {what}")
            result = await load
            if not await fleet.settle(result, timeout_s=args.settle_s):
                what += f"; NOT settled within {args.settle_s:.0f} s"
            report = await fleet.report(result)
    finally:
        servers.stop()
    return report, what, time.monotonic() - started


def _row(name: str, report: FleetReport, took_s: float) -> list[object]:
    def ms(value: float | None) -> object:
        return "n/a" if value is None else value

    return [
        name, report.published, report.stored, report.dropped, report.dead, len(report.lost),
        report.duplicated, len(report.order_problems),
        "n/a" if report.missing_vectors is None else report.missing_vectors,
        ms(report.latency_p50_ms), ms(report.latency_p99_ms), ms(report.hook_p50_ms),
        " / ".join(f"{v:.1f}" for v in report.worker_cpu_s.values()),
        sum(report.worker_cpu_s.values()) * 1000 / max(1, report.published),
        ms(report.redis_cpu_ms_per_event), took_s,
    ]  # fmt: skip


@contextmanager
def private_postgres() -> Iterator[PostgresServer]:
    """A private PostgreSQL cluster for the whole bench (a fresh database per fault)."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


Outcome = tuple[str, FleetReport, str, float]  # fault, report, what happened, run seconds


async def bench(args: argparse.Namespace, faults: list[str]) -> list[Outcome]:
    results: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="memq-bench-fleet-") as tmp, private_postgres() as pg:
        root = args.workdir.resolve() if args.workdir else Path(tmp)
        observer = FakeObserver()
        try:
            for name in faults:
                report, what, took = await run_fault(name, root, pg, observer, args)
                progress(f"{name}: {report.line()}")
                results.append((name, report, what, took))
        finally:
            observer.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="load duration per fault")
    parser.add_argument("--rate", type=float, default=4.0, help="tool calls a second, all hosts")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--settle-s", type=float, default=120.0)
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated")
    parser.add_argument("--workdir", type=Path, help="keep the fleets' dirs and logs here")
    args = parser.parse_args()
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        parser.error(f"unknown faults {unknown}; known: {','.join(FAULTS)}")
    meter = CpuMeter()
    results = asyncio.run(bench(args, faults))
    print(f"{machine()}")
    print(
        f"Per fault: {args.workers} workers, {args.hosts} agent hosts (command hook + memq agent),"
        f" {args.rate:g} calls/s for {args.seconds:g} s over {2 * args.hosts} sessions;"
        f" observer 1-2 s; PostgreSQL, Redis (AOF), a Chroma server"
    )
    print(f"Load: {meter.report()}\n")
    print(markdown_table(HEADERS, [_row(n, r, t) for n, r, _, t in results]))
    print()
    for name, report, what, _ in results:
        print(f"* {name}: {what}; spool flushes {report.spool_flushes}, hook failures"
              f" {report.hook_failures}, worker starts {report.worker_starts}")  # fmt: skip
    sys.stdout.flush()
    if not all(r.balanced() for _, r, _, _ in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
