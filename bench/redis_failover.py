"""What a Redis failover loses, and what MEMQ_PUBLISH_WAIT_REPLICAS costs to prevent it.

    python bench/redis_failover.py [--failovers 3] [--publishes 300] [--fleet-runs 1]

Every Redis set-up is `tests/support/sentinel_cluster.py`: a primary, two replicas and three
sentinels on loopback, the replicas either on a direct link or through a relay that delays
everything 25 ms each way (a replica that far behind, as across a slow network).

1. **Publish cost**: `--publishes` events published one at a time through the hook's
   producer (`SyncProducer`, a round trip each, as the command hook does), with
   MEMQ_PUBLISH_WAIT_REPLICAS 0 and 1: p50/p99 per publish.
2. **Loss per failover**: events published back to back while the primary is killed with
   `kill -9`; once the sentinels promote a replica, an event whose publish was acknowledged
   but whose id the new primary never saw is lost. `--failovers` kills per row.
3. **A fleet**: `tests/support/redis_failover.py` (two workers on PostgreSQL, two agent
   hosts at live pace through the command hook and `memq agent`, the primary killed right
   after a hook published), `--fleet-runs` runs with the setting off and on.

`publish_cost` and `failover_losses` are functions so that `bench/fleet.py` can call them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from bench.common import machine, markdown_table, percentile, progress
from tests.support.fake_observer import FakeObserver
from tests.support.postgres_server import PostgresServer
from tests.support.redis_failover import run_failover
from tests.support.sentinel_cluster import SentinelCluster
from tests.support.worker_harness import tool_call
from worker.errors import RedisUnavailableError
from worker.ingest.producer import SyncProducer, prepare_event
from worker.keys import Keys
from worker.settings import Settings

LAGS_MS = (0, 25)
PREFIX = "bench"


class PublishCost(msgspec.Struct, frozen=True, kw_only=True):
    """Per-publish latency of one configuration."""

    lag_ms: int
    wait_replicas: int
    publishes: int
    p50_ms: float
    p99_ms: float


class Losses(msgspec.Struct, frozen=True, kw_only=True):
    """Acknowledged publishes lost over `failovers` kills of one configuration."""

    lag_ms: int
    wait_replicas: int
    failovers: int
    acknowledged: int
    lost: list[int]  # per failover
    promoted_s: list[float]


def publish_cost(workdir: Path, lag_ms: int, wait_replicas: int, publishes: int) -> PublishCost:
    """Publish `publishes` events one by one on a fresh cluster; the latency of each."""
    with SentinelCluster(workdir, replicas=2, replica_delay_ms=lag_ms) as cluster:
        settings = _settings(cluster, wait_replicas)
        took: list[float] = []
        with SyncProducer.connect(settings, timeout_ms=5000) as producer:
            for n in range(publishes):
                event = prepare_event(tool_call("cost", n), settings)
                began = time.perf_counter()
                producer.publish(event)
                took.append((time.perf_counter() - began) * 1000)
    return PublishCost(
        lag_ms=lag_ms,
        wait_replicas=wait_replicas,
        publishes=publishes,
        p50_ms=percentile(took, 50),
        p99_ms=percentile(took, 99),
    )


def failover_losses(root: Path, lag_ms: int, wait_replicas: int, failovers: int) -> Losses:
    """Kill the primary `failovers` times (a fresh cluster each) while events are published."""
    lost: list[int] = []
    promoted: list[float] = []
    acknowledged = 0
    for i in range(failovers):
        with SentinelCluster(root / f"kill-{i}", replicas=2, replica_delay_ms=lag_ms) as cluster:
            settings = _settings(cluster, wait_replicas)
            acked: list[str] = []
            publisher = threading.Thread(target=_publish_until_killed, args=(settings, acked))
            publisher.start()
            time.sleep(1.0)  # a steady stream by the time of the kill
            cluster.kill_primary()
            publisher.join()
            promoted.append(cluster.wait_promoted())
            keys = Keys(settings.prefix)
            with cluster.primary().client() as new_primary:
                pipe = new_primary.pipeline(transaction=False)
                for event_id in acked:
                    pipe.exists(keys.seen(event_id))
                kept = sum(pipe.execute())
        acknowledged += len(acked)
        lost.append(len(acked) - kept)
        progress(f"lag {lag_ms} ms, WAIT {wait_replicas}: kill {i + 1}, lost {lost[-1]}")
    return Losses(
        lag_ms=lag_ms,
        wait_replicas=wait_replicas,
        failovers=failovers,
        acknowledged=acknowledged,
        lost=lost,
        promoted_s=promoted,
    )


def _publish_until_killed(settings: Settings, acked: list[str]) -> None:
    """Publish back to back until the primary dies; `acked` gets every acknowledged id."""
    with SyncProducer.connect(settings, timeout_ms=2000) as producer:
        n = 0
        while True:  # the kill ends it: the connection drops (or times out in 2 s)
            event = tool_call("kill", n)
            try:
                producer.publish(prepare_event(event, settings))
            except RedisUnavailableError:
                return  # the primary is gone: nothing after this was acknowledged
            acked.append(event.event_id)
            n += 1


def _settings(cluster: SentinelCluster, wait_replicas: int) -> Settings:
    return Settings(redis_url=cluster.url, prefix=PREFIX, publish_wait_replicas=wait_replicas)


async def _fleet(root: Path, runs: int) -> list[list[object]]:
    rows: list[list[object]] = []
    postgres = PostgresServer().start()
    observer = FakeObserver()
    try:
        for wait in (0, 1):
            for i in range(runs):
                database_url = await postgres.create_database()
                run = await run_failover(
                    root / f"fleet-{wait}-{i}", observer, database_url, wait_replicas=wait
                )
                r = run.report
                progress(f"fleet WAIT {wait} run {i + 1}: {run.line()}")
                rows.append([
                    wait, r.published, r.stored, r.dropped, r.dead,
                    len(run.lost_to_replication), len(r.lost), r.duplicated,
                    len(r.order_problems), f"{run.promoted_s:.1f}", f"{run.settled_s:.0f}",
                    _ms(r.latency_p50_ms), _ms(r.latency_p99_ms), run.failover_lines,
                    run.followed_s, len(run.tracebacks),
                ])  # fmt: skip
    finally:
        observer.close()
        postgres.stop()
    return rows


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def _publishing(root: Path, publishes: int, failovers: int) -> None:
    """The publish cost and loss tables."""
    costs = []
    for lag in LAGS_MS:
        for wait in (0, 1):
            progress(f"publish cost: lag {lag} ms, WAIT {wait}")
            costs.append(publish_cost(root / f"cost-{lag}-{wait}", lag, wait, publishes))
    print("Publish latency, one event per publish (the hook's producer):\n")
    print(markdown_table(
        ["replica lag", "MEMQ_PUBLISH_WAIT_REPLICAS", "publishes", "p50 ms", "p99 ms"],
        [[f"{c.lag_ms} ms", c.wait_replicas, c.publishes, f"{c.p50_ms:.2f}",
          f"{c.p99_ms:.2f}"] for c in costs],
    ))  # fmt: skip
    losses = [
        failover_losses(root / f"loss-{lag}-{wait}", lag, wait, failovers)
        for lag in LAGS_MS
        for wait in (0, 1)
    ]
    print("\nAcknowledged publishes lost per primary kill -9 (publishing back to back):\n")
    print(markdown_table(
        ["replica lag", "MEMQ_PUBLISH_WAIT_REPLICAS", "failovers", "acknowledged",
         "lost per failover", "promoted after (s)"],
        [[f"{x.lag_ms} ms", x.wait_replicas, x.failovers, x.acknowledged, x.lost,
          ", ".join(f"{s:.1f}" for s in x.promoted_s)] for x in losses],
    ))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failovers", type=int, default=3, help="kills per loss row")
    parser.add_argument("--publishes", type=int, default=300, help="publishes per cost row")
    parser.add_argument("--fleet-runs", type=int, default=1, help="fleet runs per setting")
    parser.add_argument("--fleet-only", action="store_true", help="only the fleet table")
    args = parser.parse_args()
    print(f"machine: {machine()}, shared\n")
    with tempfile.TemporaryDirectory(prefix="memq-bench-failover-") as tmp:
        root = Path(tmp)
        if not args.fleet_only:
            _publishing(root, args.publishes, args.failovers)
        if args.fleet_runs:
            rows = asyncio.run(_fleet(root, args.fleet_runs))
            print("\nA fleet through a primary kill -9 (replicas 25 ms behind, 3 calls/s):\n")
            print(markdown_table(
                ["WAIT", "published", "stored", "dropped", "dead", "lost to replication",
                 "lost", "duplicated", "order problems", "promoted (s)", "settled (s)",
                 "p50 ms", "p99 ms", "failover lines", "workers followed (s)", "tracebacks"],
                rows,
            ))  # fmt: skip


if __name__ == "__main__":
    main()
