"""A `memq worker` process and Redis going away: ride out a restart, exit (not hang) for good."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver
from tests.support.redis_server import RedisServer
from tests.support.worker_checks import observations, wait_until
from tests.support.worker_harness import make_settings, publish, tool_call
from tests.support.worker_process import WorkerProcess, worker_env
from worker.settings import Settings


@pytest.fixture(name="aof_server")
def _fix_aof_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.stop()


async def _stored(settings: Settings, n: int) -> bool:
    return len(await observations(settings)) >= n


async def _publish(server: RedisServer, settings: Settings, session: str, count: int) -> None:
    client = ArqRedis.from_url(server.url)
    try:
        await publish(client, settings, *[tool_call(session, n) for n in range(count)])
    finally:
        await client.aclose()


async def _restart(server: RedisServer) -> None:
    await asyncio.to_thread(server.stop)
    await asyncio.sleep(1.5)
    await asyncio.to_thread(server.start)


async def _cut_off(server: RedisServer) -> None:
    assert server.proc is not None
    # A frozen server leaves the worker's next poll in flight; killing it then cuts that
    # command off mid-reply (the case redis-py does not retry, since it may have run).
    server.proc.send_signal(signal.SIGSTOP)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(server.stop, kill=True)
    await asyncio.to_thread(server.start)


@pytest.mark.slow
@pytest.mark.parametrize("outage", [_restart, _cut_off], ids=["restart", "command-cut-off"])
async def test_a_worker_rides_out_a_redis_outage_and_keeps_working(
    tmp_path: Path,
    aof_server: RedisServer,
    fake_observer: FakeObserver,
    outage: Callable[[RedisServer], Awaitable[None]],
) -> None:
    settings = make_settings(tmp_path, aof_server.url, fake_observer.url, chroma="off")
    worker = WorkerProcess(
        worker_env(tmp_path, aof_server.url, fake_observer, chroma="off"), tmp_path / "w.log"
    )
    try:
        await _publish(aof_server, settings, "before", 3)
        await wait_until(lambda: _stored(settings, 3), timeout_s=60, what="first events stored")
        await outage(aof_server)
        await _publish(aof_server, settings, "after", 3)
        await wait_until(lambda: _stored(settings, 6), timeout_s=30, what="later events stored")
        assert worker.proc.poll() is None, worker.log()
        if outage is _cut_off:
            assert "lost Redis, polling again" in worker.log()
    finally:
        worker.stop()


@pytest.mark.slow
async def test_a_worker_that_loses_redis_for_good_exits_instead_of_hanging(
    tmp_path: Path, aof_server: RedisServer, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, aof_server.url, fake_observer.url, chroma="off")
    worker = WorkerProcess(
        worker_env(tmp_path, aof_server.url, fake_observer, chroma="off"), tmp_path / "w.log"
    )
    try:
        await _publish(aof_server, settings, "s1", 2)
        await wait_until(lambda: _stored(settings, 2), timeout_s=60, what="events stored")
        await asyncio.to_thread(aof_server.stop)
        lost = time.monotonic()
        # Reconnects retry for ~7.5 s, the poll loop for 8 s from the outage's start, then the
        # worker gives up and closes without retrying again; a supervisor starts it again.
        code = await asyncio.to_thread(worker.wait, 60)
        took = time.monotonic() - lost
    finally:
        worker.stop()
    assert code != 0
    # ~15.5 s; each restart's own retries once stacked to ~30 s, and closing retried once more.
    assert took < 28, worker.log()
