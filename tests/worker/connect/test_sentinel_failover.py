"""memq's long-lived clients through a Sentinel failover: they follow it and say so once.

A primary, a replica and three sentinels (`tests/support/sentinel_cluster.py`); the primary
is killed with `kill -9` and the sentinels promote the replica. Afterwards the worker's arq
pool and memq's own asyncio client reach the new primary, a feed consumer (what the web UI
and the Telegram bot run) subscribed before the failover receives a row announced after it,
`/metrics` and `memq stats` name the new primary, and the process logged the failover in one
line. The hook's own client asks the sentinels on every run: with the primary gone it
spools, and the next run publishes to the promoted replica.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from tests.support.feed_rows import announce, fake_row
from tests.support.fleet_load import bash_payload
from tests.support.ingest import console_script, subprocess_env
from tests.support.sentinel_cluster import SentinelCluster
from tests.support.worker_harness import tool_call
from worker.connect.primary import connected_primary, primary_state
from worker.connect.redis_client import connect_redis
from worker.errors import RedisUnavailableError
from worker.fanout.feed import FanoutConsumer
from worker.fanout.feed_items import FeedItem
from worker.ingest.producer import Producer, SyncProducer, prepare_event
from worker.keys import Keys
from worker.ops.health import HealthServer
from worker.queue.arq_pool import connect_arq
from worker.settings import Settings
from worker.storage.factory import open_store
from worker.telemetry.metrics import Metrics

FOLLOW_S = 20.0  # generous: the failover itself takes ~3 s


async def _reaches(redis: Redis, port: int) -> bool:
    try:
        await redis.ping()
    except (RedisError, OSError):
        return False
    return connected_primary(redis) == f"127.0.0.1:{port}"


async def _until(check: object, what: str) -> None:
    assert callable(check)
    deadline = time.monotonic() + FOLLOW_S
    while not await check():
        assert time.monotonic() < deadline, f"{what} after {FOLLOW_S}s"
        await asyncio.sleep(0.1)


def _hook(settings: Settings, data_dir: Path, step: int) -> str:
    """Run the Claude Code command hook for one Bash call; the call's event id."""
    event_id, body = bash_payload("hooked", step)
    env = subprocess_env(data_dir, settings.redis_url, MEMQ_PREFIX=settings.prefix)
    done = subprocess.run(
        [console_script(), "hook", "claude-code"], input=body, env=env, cwd=data_dir,
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return event_id


def _spooled(data_dir: Path) -> int:
    spool = data_dir / "spool"
    names = ("events.jsonl", "events.flushing.jsonl")
    return sum((spool / n).read_bytes().count(b"\n") for n in names if (spool / n).exists())


def _stats(settings: Settings, data_dir: Path) -> str:
    env = subprocess_env(data_dir, settings.redis_url, MEMQ_PREFIX=settings.prefix)
    done = subprocess.run(
        [console_script(), "stats"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_clients_follow_a_failover_name_the_new_primary_and_log_it_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="worker.connect.primary")
    cluster = await asyncio.to_thread(SentinelCluster(tmp_path / "redis").start)
    settings = Settings(redis_url=cluster.url, prefix="fv", data_dir=str(tmp_path / "data"))
    keys = Keys(settings.prefix)
    arq = await connect_arq(settings)
    own = await connect_redis(settings)
    store = open_store(settings)
    metrics = Metrics()
    health = HealthServer(settings, own, store, metrics)
    got: list[FeedItem] = []

    async def handler(item: FeedItem) -> None:
        got.append(item)

    consumer = FanoutConsumer(own, keys, handler, name=None, poll_interval_s=30)
    task = asyncio.create_task(consumer.run())
    try:
        old, new = cluster.primary().port, cluster.replica().port
        await consumer.wait_ready()
        assert connected_primary(arq) == f"127.0.0.1:{old}"
        await health.refresh()
        assert f'memq_redis_primary{{address="127.0.0.1:{old}"}} 1.0' in metrics.render().decode()
        assert f"redis primary: 127.0.0.1:{old}" in _stats(settings, tmp_path / "cli")

        # The count is the process's: other tests' clusters in this process count too.
        failovers_before = primary_state().failovers
        await asyncio.to_thread(cluster.kill_primary)
        host = tmp_path / "host"
        host.mkdir()
        first = await asyncio.to_thread(_hook, settings, host, 0)
        # The sentinels take a second to notice: a hook in that window finds no primary.
        in_window = cluster.sentinels[0].master_port() == old
        spooled_in_window = _spooled(host)
        await asyncio.to_thread(cluster.wait_promoted)
        second = await asyncio.to_thread(_hook, settings, host, 1)  # flushes the spool first
        await _until(lambda: _reaches(arq, new), "the arq pool does not reach the new primary")
        await _until(lambda: _reaches(own, new), "memq's client does not reach the new primary")
        await announce(arq, keys, store, [fake_row(1, title="after the failover")])
        await _until(lambda: _true(bool(got)), "the feed consumer got nothing")

        hooked = [bool(await own.exists(keys.seen(e))) for e in (first, second)]
        await health.refresh()
        rendered = metrics.render().decode()
        stats = _stats(settings, tmp_path / "cli")
    finally:
        consumer.stop()
        await task
        await store.aclose()
        await arq.aclose()
        await own.aclose()
        await asyncio.to_thread(cluster.stop)
    assert got[0].row.title == "after the failover"
    assert not in_window or spooled_in_window == 1
    assert hooked == [True, True]
    assert _spooled(host) == 0
    assert f'memq_redis_primary{{address="127.0.0.1:{new}"}} 1.0' in rendered
    assert f"127.0.0.1:{old}" not in rendered  # one series: the old primary's is gone
    assert f"memq_redis_failovers {failovers_before + 1:.1f}" in rendered
    assert f"redis primary: 127.0.0.1:{new}" in stats
    said = [r.getMessage() for r in caplog.records if "Redis primary" in r.getMessage()]
    assert said == [
        f"Redis primary of 'mymaster' is now 127.0.0.1:{new} (was 127.0.0.1:{old}):"
        " a Sentinel failover; following it"
    ]


async def _true(value: bool) -> bool:
    return value


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_a_demoted_primary_sends_clients_to_the_new_one_and_the_hook_spools(
    tmp_path: Path,
) -> None:
    cluster = await asyncio.to_thread(SentinelCluster(tmp_path / "redis").start)
    settings = Settings(redis_url=cluster.url, prefix="ro", data_dir=str(tmp_path / "data"))
    arq = await connect_arq(settings)
    own = await connect_redis(settings)
    hook_producer = SyncProducer.connect(settings, timeout_ms=5000)
    try:
        for client in (arq, own):
            await client.set("before", 1)  # connected to the primary before it is demoted
        hook_producer.publish(prepare_event(tool_call("ro", 0), settings))
        old = await asyncio.to_thread(cluster.switch_over)
        new = cluster.primary().port
        # The demoted primary closes its clients' connections or answers READONLY: redis-py
        # asks the sentinels again and writes to the new primary; the hook's client reports
        # Redis unavailable, which spools the event (the next run publishes it).
        for client in (arq, own):
            await client.set("after", 1)
            assert connected_primary(client) == f"127.0.0.1:{new}"
        with pytest.raises(RedisUnavailableError, match=r"READONLY|lost Redis"):
            hook_producer.publish(prepare_event(tool_call("ro", 1), settings))
        # A client that still goes to the old address (a stale DNS name, a plain URL) is
        # answered READONLY, and both producers count it as not published.
        stale = Settings(redis_url=f"redis://127.0.0.1:{old.port}/0", prefix="ro")
        with (
            SyncProducer.connect(stale, timeout_ms=5000) as producer,
            pytest.raises(RedisUnavailableError, match="READONLY"),
        ):
            producer.publish(prepare_event(tool_call("ro", 2), stale))
        async with await Producer.connect(stale) as async_producer:
            with pytest.raises(RedisUnavailableError, match="ReadOnlyError: You can't write"):
                await async_producer.publish(prepare_event(tool_call("ro", 3), stale))
    finally:
        hook_producer.close()
        await arq.aclose()
        await own.aclose()
        await asyncio.to_thread(cluster.stop)
    assert old.port != new


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_a_write_retried_through_a_failover_reaches_the_new_primary_not_the_old_one_back(
    tmp_path: Path,
) -> None:
    cluster = await asyncio.to_thread(SentinelCluster(tmp_path / "redis").start)
    settings = Settings(redis_url=cluster.url, prefix="zz", data_dir=str(tmp_path / "data"))
    arq = await connect_arq(settings)
    try:
        await arq.set("k", "before")
        victim = await asyncio.to_thread(cluster.kill_primary)
        # Sent while there is no primary: the pool keeps reconnecting (its ride-out).
        write = asyncio.create_task(arq.set("k", "during"))
        await asyncio.to_thread(cluster.wait_promoted)
        # The old primary back at once, empty: it says it is a master until a sentinel
        # converts it (seconds later). A retry must not take it for the primary.
        await asyncio.to_thread(victim.start)
        await asyncio.wait_for(write, FOLLOW_S)
        with cluster.primary().client() as new_primary, victim.client() as old_one:
            on_new, on_old = new_primary.get("k"), old_one.get("k")
    finally:
        await arq.aclose()
        await asyncio.to_thread(cluster.stop)
    assert on_new == b"during"
    assert on_old is None  # nothing went to the old primary while it was a master
