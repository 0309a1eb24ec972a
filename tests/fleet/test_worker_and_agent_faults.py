"""A fleet under a worker `kill -9` mid-turn and a `memq agent` killed and restarted.

Two `memq worker` processes (each its own data dir) share a private PostgreSQL and Redis;
two agent hosts (each its own data dir and spool) publish Claude Code tool calls at live
pace through the real command hook, which relays to the host's `memq agent`; the fake
observer answers in 1-2 s. While the calls flow, a worker is killed with SIGKILL while one
of its turns waits on the observer (and started again, as a supervisor would), and host 0's
agent is killed with SIGKILL after the host's second hook of the load and started again 3 s
later. Afterwards every published call is stored exactly once (or dropped with a reason, or
dead-lettered): the killed worker's turn is retaken by a worker, the hooks that found no
agent published by themselves, and each session's observations were committed in order.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_observer import FakeObserver
from tests.support.fleet import Fleet
from tests.support.fleet_load import LoadResult, next_publish
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.redis_server import RedisServer

SECONDS = 8.0
RATE = 3.0  # calls a second over 4 sessions: ~24 calls, a hook every ~330 ms
AGENT_DOWN_S = 3.0


@pytest.fixture(name="fleet_redis")
def fleet_redis_fixture(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server of the test's own (its CPU counts this fleet only)."""
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_a_worker_killed_mid_turn_and_an_agent_killed_lose_and_duplicate_nothing(
    tmp_path: Path,
    fake_observer: FakeObserver,
    postgres_server: PostgresServer,
    fleet_redis: RedisServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database_url = await postgres_server.create_database()
    started = time.monotonic()
    async with Fleet(
        tmp_path / "fleet",
        redis_url=fleet_redis.url,
        database_url=database_url,
        observer=fake_observer,
        workers=2,
        hosts=2,
    ) as fleet:
        progress = LoadResult()
        load = asyncio.create_task(fleet.load(seconds=SECONDS, rate=RATE, into=progress))

        async def agent_fault() -> tuple[float, int, float]:
            # Paced by the load, not by the worker fault (which waits on a worker getting a
            # turn, late on a busy machine): the agent is down while host 0's hooks still run.
            await next_publish(progress, host=0)
            # Right after a hook the agent answered: the agent may still hold it in its spool.
            await next_publish(progress, host=0)
            killed_at = time.time()
            await asyncio.to_thread(fleet.kill_agent, 0)
            spooled = fleet.hosts[0].spooled_lines()
            await asyncio.sleep(AGENT_DOWN_S)
            back_at = time.time()
            await asyncio.to_thread(fleet.restart_agent, 0)
            return killed_at, spooled, back_at

        agent = asyncio.create_task(agent_fault())
        try:
            # Whichever worker's turn reaches the observer first: arq may hand one worker
            # every session for a while, so waiting on a given one could outlast the load.
            killed = await asyncio.to_thread(fleet.kill_worker_mid_turn, timeout_s=20)
        except BaseException:
            agent.cancel()  # not left running into the fleet's teardown
            raise
        agent_killed_at, spooled_at_kill, agent_back_at = await agent
        result = await load
        settled = await fleet.settle(result, timeout_s=60)
        report = await fleet.report(result)
    took = time.monotonic() - started
    with capsys.disabled():
        sys.stdout.write(
            f"\nfleet (worker kill -9 mid-turn, agent kill -9 with {spooled_at_kill} call(s) in"
            f" its spool): {report.line()}; {took:.1f} s\n"
        )
    assert killed is not None, "no worker had a turn waiting on the observer"
    assert [w.kills for w in fleet.workers] == [int(w.index == killed) for w in fleet.workers]
    assert fleet.workers[killed].starts == 2
    assert fleet.hosts[0].agent_kills == 1
    # Host 0's hooks ran while its agent was down, and what they published counts below.
    assert any(
        p.host == 0 and agent_killed_at <= p.published_at <= agent_back_at for p in result.published
    )
    assert settled, f"not every call processed or dead-lettered: {report.line()}"
    assert report.hook_failures == 0
    assert report.published == len(result.published) >= SECONDS * RATE * 0.8
    assert report.lost == []
    assert report.double_counted == []
    assert report.duplicated == 0
    assert report.order_problems == []
    assert report.observer_order_problems == []
    assert report.stored_without_observation == 0
    assert report.stored + report.dropped + report.dead == report.published
    # The deterministic observer never sends garbage: every call is stored.
    assert report.stored == report.published
    assert report.balanced()
