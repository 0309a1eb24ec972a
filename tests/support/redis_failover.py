"""A fleet through a Redis failover: the primary `kill -9`'d under live load, then accounted.

Shared by `tests/fleet/test_redis_failover.py` and `bench/redis_failover.py`. The Redis set-up
is a `SentinelCluster` with two replicas, each FLEET_LAG_MS behind its primary (a slow link),
so that asynchronous replication can lose a publish the primary acknowledged, and the
promoted replica still has a replica for MEMQ_PUBLISH_WAIT_REPLICAS=1. A call the fleet lost
is counted as lost to replication when the promoted primary never saw its event id (no
`seen:<event>` key): its publish was acknowledged by the old primary and died with it.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from pathlib import Path

import msgspec

from tests.support.fake_observer import FakeObserver
from tests.support.fleet import Fleet
from tests.support.fleet_accounting import FleetReport
from tests.support.fleet_load import LoadResult
from tests.support.sentinel_cluster import SentinelCluster
from worker.keys import Keys

SECONDS = 8.0
RATE = 3.0  # calls a second over 4 sessions
FLEET_LAG_MS = 25  # a WAIT then costs one round trip (50 ms) per publish
FAILOVER_LINE = "a Sentinel failover; following it"


async def _next_publish(progress: LoadResult, timeout_s: float = 20.0) -> None:
    seen = len(progress.published)
    deadline = time.monotonic() + timeout_s
    while len(progress.published) == seen:
        assert time.monotonic() < deadline, f"nothing published in {timeout_s}s"
        await asyncio.sleep(0.005)


async def run_failover(
    workdir: Path,
    observer: FakeObserver,
    database_url: str,
    *,
    wait_replicas: int,
    seconds: float = SECONDS,
    rate: float = RATE,
) -> FailoverRun:
    """A fleet on a Sentinel cluster (two replicas, each FLEET_LAG_MS behind) whose primary is
    killed a third of the way into a live load, right after a hook published; the accounting.

    `tests/fleet/test_redis_failover.py` runs it once; `bench/redis_failover.py` several times.
    """
    started = time.monotonic()
    cluster = SentinelCluster(workdir / "redis", replicas=2, replica_delay_ms=FLEET_LAG_MS)
    await asyncio.to_thread(cluster.start)
    try:
        fleet = Fleet(
            workdir / "fleet",
            redis_url=cluster.url,
            database_url=database_url,
            observer=observer,
            workers=2,
            hosts=2,
            # the hooks and `memq agent` publish
            host_settings={"publish_wait_replicas": str(wait_replicas)},
        )
        async with fleet:
            progress = LoadResult()
            load = asyncio.create_task(fleet.load(seconds=seconds, rate=rate, into=progress))
            await asyncio.sleep(seconds / 3)
            await _next_publish(progress)
            killed_at, killed_wall = time.monotonic(), time.time()
            await asyncio.to_thread(cluster.kill_primary)
            promoted_s = await asyncio.to_thread(cluster.wait_promoted)
            rejoin = asyncio.create_task(asyncio.to_thread(cluster.restart_old_primary_as_replica))
            result = await load
            settled = await fleet.settle(result, timeout_s=60)
            settled_s = time.monotonic() - killed_at
            report = await fleet.report(result)
            keys = Keys(fleet.prefix)
            unseen = {e for e in report.lost if not await fleet.redis.exists(keys.seen(e))}
            rejoined = await rejoin
            exits = [w.index for w in fleet.workers if not w.alive()]
            logs = [_worker_log(fleet, w.index) for w in fleet.workers]
            switches = cluster.switches()  # after the logs: a later failover counts in both
    finally:
        await asyncio.to_thread(cluster.stop)
    return FailoverRun(
        report=report,
        settled=settled,
        lost_to_replication=sorted(unseen),
        promoted_s=promoted_s,
        settled_s=settled_s,
        old_primary_claimed_master=rejoined,
        worker_exits=exits,
        switches=switches,
        failover_lines=[log.count(FAILOVER_LINE) for log in logs],
        followed_s=[_followed_s(log, killed_wall) for log in logs],
        tracebacks=[t for log in logs for t in _tracebacks(log)],
        took_s=time.monotonic() - started,
    )


class FailoverRun(msgspec.Struct, kw_only=True):
    """One fleet run through a primary `kill -9`."""

    report: FleetReport
    settled: bool
    lost_to_replication: list[str]  # acknowledged, yet absent from the promoted replica
    promoted_s: float  # kill -9 -> every sentinel names the new primary
    settled_s: float  # kill -9 -> every call processed or dead-lettered
    old_primary_claimed_master: bool  # seen as a master when it came back, before sentinel
    worker_exits: list[int]
    switches: int  # failovers the sentinels made: the kill's, and any a starved machine added
    failover_lines: list[int]  # per worker: log lines naming the failover
    followed_s: list[float | None]  # per worker: kill -9 -> its line naming the new primary
    tracebacks: list[str]  # in the workers' logs: each one's log line, to show in a failure

    took_s: float

    def line(self) -> str:
        """One line for a test's output."""
        return (
            f"promoted in {self.promoted_s:.1f} s, settled {self.settled_s:.0f} s after the kill;"
            f" lost to replication {len(self.lost_to_replication)}; sentinel failovers"
            f" {self.switches}, failover log lines"
            f" {self.failover_lines} (after {_seconds(self.followed_s)}), tracebacks"
            f" {len(self.tracebacks)}; {self.report.line()};"
            f" {self.took_s:.1f} s"
        )


def _followed_s(log: str, killed_at: float) -> float | None:
    """Seconds from the kill to the worker's (JSON) line naming the new primary."""
    for line in log.splitlines():
        if FAILOVER_LINE in line:
            ts = json.loads(line)["ts"]
            return round(datetime.fromisoformat(ts).timestamp() - killed_at, 1)
    return None


def _tracebacks(log: str) -> list[str]:
    """The log lines that hold a traceback (a JSON line carries it whole)."""
    return [line[-2000:] for line in log.splitlines() if "Traceback" in line]


def _seconds(values: list[float | None]) -> str:
    return ", ".join("-" if v is None else f"{v:.1f} s" for v in values)


def _worker_log(fleet: Fleet, index: int) -> str:
    logs = sorted(fleet.workdir.glob(f"logs/worker-{index}-*.log"))
    return "".join(p.read_text(errors="replace") for p in logs)
