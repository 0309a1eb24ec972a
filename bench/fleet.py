"""A memq fleet under faults at live pace: what is published, stored, dropped, dead-lettered,
lost and duplicated per fault, publish -> stored latency beside a 1-2 s observer, and what
each worker and Redis spend.

    .venv/bin/python bench/fleet.py [--seconds 20] [--rate 4] [--workers 2] [--hosts 2]
                                    [--faults none,worker-kill,…]

Each fault gets a fresh fleet (tests/support/fleet.py): `--workers` `memq worker` processes,
each with its own data dir, on a private PostgreSQL database, a private Redis (AOF) and a Chroma
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
* redis-failover: Redis is a Sentinel cluster (a primary and two replicas, each 25 ms
  behind it over a slow link, three sentinels); its primary is killed with SIGKILL right
  after a hook published, a replica is promoted, and the old primary comes back as a replica;
* redis-failover-wait1: the same with MEMQ_PUBLISH_WAIT_REPLICAS=1 on the hosts (a publish
  counts once a replica holds it);
* postgres-restart: PostgreSQL is stopped (`pg_ctl stop -m fast`) and started again 5 s
  later (turns wait for it without counting attempts).

The faults are in bench/fleet_faults.py, the servers in bench/fleet_servers.py.

After the load the bench waits until every published call is processed or dead-lettered and
every observation is in the Chroma server, then reads the accounting back from PostgreSQL,
Redis and Chroma. Latency runs from the hook's exit to the event's processed_at. CPU is counted from
the load's start until the accounting (/proc): each worker slot's (a restarted worker's
start-up included, the first start-up not), and the redis-server's, idle polling included,
per published call.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.charts import Bar, Group, write_chart
from bench.common import CpuMeter, machine, markdown_table, progress
from bench.fleet_faults import FAULTS
from bench.fleet_servers import Servers
from tests.support.fake_observer import FakeObserver
from tests.support.fleet import Fleet
from tests.support.fleet_accounting import FleetReport
from tests.support.fleet_load import LoadResult
from tests.support.postgres_server import PostgresServer
from worker.keys import Keys

HEADERS = [
    "fault", "published", "stored", "dropped", "dead", "lost", "duplicated", "out of order",
    "without vectors", "p50 ms", "p99 ms", "hook p50 ms", "worker CPU s", "worker CPU ms/call",
    "Redis CPU ms/call", "run s",
]  # fmt: skip


async def run_fault(
    name: str,
    root: Path,
    postgres: PostgresServer,
    observer: FakeObserver,
    args: argparse.Namespace,
) -> Outcome:
    """One fresh fleet, one load with the fault a third of the way in, its accounting."""
    spec = FAULTS[name]
    database_url = await postgres.create_database()
    (root / name).mkdir(parents=True, exist_ok=True)
    servers = await asyncio.to_thread(
        Servers, root / name, postgres, database_url, sentinel=spec.sentinel
    )
    started = time.monotonic()
    try:
        async with Fleet(
            root / name / "fleet",
            redis_url=servers.redis_url,
            database_url=database_url,
            observer=observer,
            chroma=servers.chroma_url,
            workers=args.workers,
            hosts=args.hosts,
            redis_cpu=servers.redis_cpu_s,
            host_settings={"publish_wait_replicas": str(spec.publish_wait_replicas)},
        ) as fleet:
            watch = LoadResult()
            load = asyncio.create_task(fleet.load(seconds=args.seconds, rate=args.rate, into=watch))
            await asyncio.sleep(args.seconds / 3)
            what = await spec.inject(fleet, servers, watch)
            progress(f"{name}: {what}")
            result = await load
            if not await fleet.settle(result, timeout_s=args.settle_s, vectors=False):
                what += f"; NOT every call processed within {args.settle_s:.0f} s"
            elif not await fleet.settle(result, timeout_s=args.vectors_s):
                what += f"; not every observation indexed {args.vectors_s:.0f} s after the last"
            report = await fleet.report(result)
            # A lost call the promoted primary never saw (no seen:<event> key) was
            # acknowledged by the old primary and died with it: lost to replication.
            keys = Keys(fleet.prefix)
            unseen = [e for e in report.lost if not await fleet.redis.exists(keys.seen(e))]
            if spec.sentinel:
                what += f"; lost to asynchronous replication {len(unseen)}"
    finally:
        await asyncio.to_thread(servers.stop)
    return Outcome(
        fault=name, report=report, what=what, took_s=time.monotonic() - started,
        lost_to_replication=len(unseen),
    )  # fmt: skip


class Outcome(msgspec.Struct, kw_only=True):
    """One fault's run."""

    fault: str
    report: FleetReport
    what: str  # what the fault did, in one line
    took_s: float
    lost_to_replication: int  # lost calls the promoted primary never saw

    def as_expected(self) -> bool:
        """Balanced, but for two things memq documents: observations whose vectors are still
        queued (their outbox rows pending: a killed worker's claimed rows wait out the
        claim), and, with Redis's asynchronous replication and no WAIT, calls that died with
        the old primary (what MEMQ_PUBLISH_WAIT_REPLICAS is for)."""
        report = self.report
        if (report.missing_vectors or 0) <= report.vector_outbox_pending:
            report = msgspec.structs.replace(report, missing_vectors=0)
        spec = FAULTS[self.fault]
        if spec.sentinel and spec.publish_wait_replicas == 0:
            if self.lost_to_replication != len(report.lost):
                return False
            report = msgspec.structs.replace(
                report, lost=[], published=report.published - self.lost_to_replication
            )
        return report.balanced()


def _row(o: Outcome) -> list[object]:
    def ms(value: float | None) -> object:
        return "n/a" if value is None else value

    report = o.report
    return [
        o.fault, report.published, report.stored, report.dropped, report.dead, len(report.lost),
        report.duplicated, len(report.order_problems) + len(report.observer_order_problems),
        "n/a" if report.missing_vectors is None else report.missing_vectors,
        ms(report.latency_p50_ms), ms(report.latency_p99_ms), ms(report.hook_p50_ms),
        " / ".join(f"{v:.1f}" for v in report.worker_cpu_s.values()),
        sum(report.worker_cpu_s.values()) * 1000 / max(1, report.published),
        ms(report.redis_cpu_ms_per_event), o.took_s,
    ]  # fmt: skip


def chart(results: list[Outcome], path: Path) -> Path:
    """Hook-to-stored p50 and p99 per fault as a bar chart (SVG), from the table's results."""
    groups = []
    for o in results:
        r = o.report
        pairs = ((50, r.latency_p50_ms), (99, r.latency_p99_ms))
        bars = [Bar(f"p{q}", v or 0.0, i) for i, (q, v) in enumerate(pairs)]
        groups.append(Group(f"{o.fault}: {r.stored} of {r.published} stored once", bars))
    title = "A fleet under faults: hook to stored, ms (the observer's 1-2 s included)"
    return write_chart(path, title, "ms", groups)


@contextmanager
def private_postgres() -> Iterator[PostgresServer]:
    """A private PostgreSQL cluster for the whole bench (a fresh database per fault)."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


async def bench(args: argparse.Namespace, faults: list[str]) -> list[Outcome]:
    results: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="memq-bench-fleet-") as tmp, private_postgres() as pg:
        root = args.workdir.resolve() if args.workdir else Path(tmp)
        observer = FakeObserver()
        try:
            for name in faults:
                outcome = await run_fault(name, root, pg, observer, args)
                progress(f"{name}: {outcome.report.line()}")
                results.append(outcome)
        finally:
            observer.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="load duration per fault")
    parser.add_argument("--rate", type=float, default=4.0, help="tool calls a second, all hosts")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--settle-s", type=float, default=120.0, help="for every call stored")
    parser.add_argument("--vectors-s", type=float, default=30.0, help="then for every vector")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated")
    parser.add_argument("--workdir", type=Path, help="keep the fleets' dirs and logs here")
    parser.add_argument("--chart", type=Path, help="also write the latency chart (SVG) here")
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
        f" observer 1-2 s; PostgreSQL, a Chroma server, Redis (AOF; for redis-failover* a"
        f" Sentinel cluster, no AOF)"
    )
    print(f"Load: {meter.report()}\n")
    print(markdown_table(HEADERS, [_row(o) for o in results]))
    print()
    for o in results:
        print(f"* {o.fault}: {o.what}; spool flushes {o.report.spool_flushes}, hook failures"
              f" {o.report.hook_failures}, worker starts {o.report.worker_starts}, outbox rows"
              f" not yet marked indexed {o.report.vector_outbox_pending}")  # fmt: skip
    if args.chart:
        print(f"\nchart: {chart(results, args.chart)}")
    sys.stdout.flush()
    if not all(o.as_expected() for o in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
