"""A Redis failover under a live fleet: the primary `kill -9`'d, Sentinel promotes the replica.

The Redis set-up is `tests/support/sentinel_cluster.py` (a primary, one replica, three
sentinels, failover within ~3 s) and memq reaches it by its `redis+sentinel://` URL.

Redis replicates asynchronously: a publish the primary acknowledged may not have reached the
replica when the primary dies, and the promoted replica never has it. The first test shows
this with the replica held 200 ms behind (a slow link): publishes acknowledged just before
the kill are gone, unless MEMQ_PUBLISH_WAIT_REPLICAS=1 makes each publish wait (Redis WAIT)
until the replica holds it. The second runs a fleet (two workers on PostgreSQL, two agent
hosts publishing through the command hook and `memq agent`) while the primary is killed
right after a hook published: every call is stored once, dropped with a reason or
dead-lettered, except those the promoted replica never received, which are counted (and
with MEMQ_PUBLISH_WAIT_REPLICAS=1 there are none). The old primary then comes back and the
sentinels make it a replica of the new one.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from tests.support.fake_observer import FakeObserver
from tests.support.fleet import Fleet
from tests.support.fleet_load import LoadResult
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.sentinel_cluster import SentinelCluster
from tests.support.worker_harness import tool_call
from worker.errors import RedisUnavailableError
from worker.ingest.producer import (
    Producer,
    PublishNotReplicatedError,
    SyncProducer,
    prepare_event,
)
from worker.keys import Keys
from worker.settings import Settings

LAG_MS = 200  # the replica's link delivers everything this late, both ways
BURST = 8
SECONDS = 8.0
RATE = 3.0  # calls a second over 4 sessions


def _publish_burst(settings: Settings, session: str) -> tuple[list[str], list[float]]:
    """Publish BURST events one by one as the hook does; (acknowledged ids, seconds each)."""
    acked: list[str] = []
    took: list[float] = []
    with SyncProducer.connect(settings, timeout_ms=5000) as producer:
        for n in range(BURST):
            event = tool_call(session, n)
            began = time.monotonic()
            producer.publish(prepare_event(event, settings))
            took.append(time.monotonic() - began)
            acked.append(event.event_id)
    return acked, took


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("wait_replicas", [0, 1])
def test_a_primary_killed_right_after_publishes_loses_them_unless_publish_waits_for_a_replica(
    tmp_path: Path, wait_replicas: int
) -> None:
    with SentinelCluster(tmp_path / "redis", replica_delay_ms=LAG_MS) as cluster:
        settings = Settings(redis_url=cluster.url, prefix="fo", publish_wait_replicas=wait_replicas)
        acked, took = _publish_burst(settings, "burst")
        cluster.kill_primary()
        cluster.wait_promoted()
        keys = Keys(settings.prefix)
        with cluster.primary().client() as new_primary:
            kept = [e for e in acked if new_primary.exists(keys.seen(e))]
            entries = new_primary.xlen(keys.events("burst"))
    lost = len(acked) - len(kept)
    sys.stdout.write(f"\nWAIT {wait_replicas}: {lost} of {len(acked)} acknowledged lost\n")
    assert entries == len(kept)
    if wait_replicas:
        assert lost == 0
        # Each publish waited for the replica's acknowledgement over the slow link.
        assert min(took) >= LAG_MS * 2 / 1000 * 0.9
    else:
        # The replica is LAG_MS behind: at least the last publish had not reached it.
        assert lost >= 1
        assert kept == acked[: len(kept)]  # what it has is a prefix: order holds


@pytest.mark.slow
@pytest.mark.timeout(60)
async def test_with_no_replica_up_a_waiting_publish_is_refused_by_both_producers(
    tmp_path: Path,
) -> None:
    with SentinelCluster(tmp_path / "redis") as cluster:
        cluster.replica().kill()
        settings = Settings(redis_url=cluster.url, prefix="fo", publish_wait_replicas=1)
        event = prepare_event(tool_call("alone", 0), settings)
        with (
            SyncProducer.connect(settings, timeout_ms=5000) as sync_producer,
            pytest.raises(PublishNotReplicatedError, match="reached 0 of"),
        ):
            sync_producer.publish(event)
        async with await Producer.connect(settings) as producer:
            with pytest.raises(PublishNotReplicatedError, match="reached 0 of"):
                await producer.publish(event)
        # Redis took it: a re-send once a replica is back is a duplicate, not a second copy.
        with cluster.primary().client() as primary:
            assert primary.xlen(Keys(settings.prefix).events("alone")) == 1
    assert issubclass(PublishNotReplicatedError, RedisUnavailableError)  # callers spool it


async def _next_publish(progress: LoadResult, timeout_s: float = 20.0) -> None:
    seen = len(progress.published)
    deadline = time.monotonic() + timeout_s
    while len(progress.published) == seen:
        assert time.monotonic() < deadline, f"nothing published in {timeout_s}s"
        await asyncio.sleep(0.005)


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("wait_replicas", [0, 1])
async def test_a_fleet_rides_out_a_redis_failover(
    tmp_path: Path,
    fake_observer: FakeObserver,
    postgres_server: PostgresServer,
    capsys: pytest.CaptureFixture[str],
    wait_replicas: int,
) -> None:
    database_url = await postgres_server.create_database()
    started = time.monotonic()
    cluster = SentinelCluster(tmp_path / "redis").start()
    try:
        fleet = Fleet(
            tmp_path / "fleet",
            redis_url=cluster.url,
            database_url=database_url,
            observer=fake_observer,
            workers=2,
            hosts=2,
        )
        for host in fleet.hosts:
            host.env["MEMQ_PUBLISH_WAIT_REPLICAS"] = str(wait_replicas)
        async with fleet:
            progress = LoadResult()
            load = asyncio.create_task(fleet.load(seconds=SECONDS, rate=RATE, into=progress))
            await asyncio.sleep(SECONDS / 3)
            await _next_publish(progress)
            killed_at = time.monotonic()
            await asyncio.to_thread(cluster.kill_primary)
            promoted_s = await asyncio.to_thread(cluster.wait_promoted)
            rejoin = asyncio.create_task(asyncio.to_thread(cluster.restart_old_primary_as_replica))
            result = await load
            settled = await fleet.settle(result, timeout_s=60)
            report = await fleet.report(result)
            keys = Keys(fleet.prefix)
            unseen = {e for e in report.lost if not await fleet.redis.exists(keys.seen(e))}
            claimed_master = await rejoin
            exits = [w.index for w in fleet.workers if not w.alive()]
    finally:
        cluster.stop()
    took = time.monotonic() - started
    with capsys.disabled():
        sys.stdout.write(
            f"\nfleet (Redis primary kill -9, MEMQ_PUBLISH_WAIT_REPLICAS={wait_replicas}):"
            f" promoted in {promoted_s:.1f} s ({time.monotonic() - killed_at:.0f} s to settle);"
            f" lost to replication {len(unseen)}; {report.line()}; {took:.1f} s\n"
        )
    assert exits == [], "a worker exited during the failover"
    assert claimed_master in (True, False)
    assert settled, f"not every call processed or dead-lettered: {report.line()}"
    assert report.hook_failures == 0
    # Every call missing is one the promoted replica never received (its publish was
    # acknowledged by the old primary): nothing else is lost.
    assert set(report.lost) == unseen
    if wait_replicas:
        assert report.lost == []
    assert report.double_counted == []
    assert report.duplicated == 0
    assert report.order_problems == []
    assert report.stored + report.dropped + report.dead + len(report.lost) == report.published
