"""A Redis failover under a live fleet: the primary `kill -9`'d, Sentinel promotes a replica.

The Redis set-up is `tests/support/sentinel_cluster.py` (a primary, replicas and three
sentinels, failover within ~3 s) and memq reaches it by its `redis+sentinel://` URL.

Redis replicates asynchronously: a publish the primary acknowledged may not have reached a
replica when the primary dies, and the promoted replica never has it. The first test shows
this with the replica held 200 ms behind (a slow link): publishes acknowledged just before
the kill are gone, unless MEMQ_PUBLISH_WAIT_REPLICAS=1 makes each publish wait (Redis WAIT)
until the replica holds it. With no replica up such a publish is not counted: both
producers say so, and the hook spools it. The last runs a fleet (two workers on PostgreSQL,
two agent hosts publishing through the command hook and `memq agent` with
MEMQ_PUBLISH_WAIT_REPLICAS=1) while the primary is killed right after a hook published
(`tests/support/redis_failover.py`): every call is stored once, dropped with a reason or
dead-lettered, none is lost, each worker logs the failover once, and the old primary comes
back as a replica of the new one. `bench/redis_failover.py` runs it with the setting off and
on, and counts what asynchronous replication loses.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fake_observer import FakeObserver
from tests.support.fleet_load import bash_payload
from tests.support.ingest import console_script, subprocess_env
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.redis_failover import RATE, SECONDS, run_failover
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


def _hook(env: dict[str, str], body: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [console_script(), "hook", "claude-code"], input=body, env=env,
        cwd=env["MEMQ_DATA_DIR"], capture_output=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(60)
async def test_with_no_replica_up_a_waiting_publish_is_not_counted_and_the_hook_spools_it(
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
        # `memq agent`'s client, on the hook's short timeout: WAIT stays within it, so the
        # answer is "too few replicas", not a read timed out as if Redis were gone.
        short = settings.hook_redis_timeout_ms
        async with await Producer.connect(settings, timeout_ms=short) as producer:
            with pytest.raises(PublishNotReplicatedError, match="reached 0 of"):
                await producer.publish(event)
        # The command hook, on its own path: the unreplicated call is spooled (exit 0).
        host = tmp_path / "host"
        host.mkdir()
        _, body = bash_payload("hooked", 0)
        env = subprocess_env(
            host, cluster.url, MEMQ_PREFIX=settings.prefix, MEMQ_PUBLISH_WAIT_REPLICAS="1"
        )
        done = await asyncio.to_thread(_hook, env, body)
        assert done.returncode == 0
        assert b"reached 0 of MEMQ_PUBLISH_WAIT_REPLICAS=1" in done.stderr
        assert (host / "spool" / "events.jsonl").read_bytes().count(b"\n") == 1
        # Redis took them: a re-send once a replica is back is a duplicate, not a second copy.
        with cluster.primary().client() as primary:
            assert primary.xlen(Keys(settings.prefix).events("alone")) == 1
            assert primary.xlen(Keys(settings.prefix).events("hooked")) == 1
    assert issubclass(PublishNotReplicatedError, RedisUnavailableError)  # callers spool it


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_a_fleet_that_waits_for_a_replica_loses_nothing_in_a_redis_failover(
    tmp_path: Path,
    fake_observer: FakeObserver,
    postgres_server: PostgresServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database_url = await postgres_server.create_database()
    run = await run_failover(tmp_path, fake_observer, database_url, wait_replicas=1)
    report = run.report
    with capsys.disabled():
        sys.stdout.write(f"\nfleet (Redis primary kill -9, WAIT 1): {run.line()}\n")
    assert run.worker_exits == [], "a worker exited during the failover"
    assert run.settled, f"not every call processed or dead-lettered: {report.line()}"
    assert report.hook_failures == 0
    assert report.lost == [] == run.lost_to_replication
    assert report.double_counted == []
    assert report.duplicated == 0
    assert report.order_problems == []
    assert report.stored + report.dropped + report.dead == report.published >= SECONDS * RATE * 0.8
    # Each worker said it once per failover it followed (one, unless a starved machine made
    # the sentinels fail over again: a worker may then follow both at once), and no traceback.
    assert run.switches >= 1
    assert all(1 <= lines <= run.switches for lines in run.failover_lines), run.failover_lines
    assert run.tracebacks == [], "\n".join(run.tracebacks)
