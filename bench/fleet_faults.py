"""The faults bench/fleet.py injects a third of the way into a fleet's load.

Each takes the fleet, its servers and the load's progress, injects its fault (and ends it),
and says in one line what happened.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import asyncpg
import msgspec

from bench.fleet_servers import Servers
from tests.support.fleet import Fleet
from tests.support.fleet_load import LoadResult, next_publish

AGENT_DOWN_S = 3.0
SERVER_DOWN_S = 5.0  # how long the Chroma server or PostgreSQL stays down
FAILOVER_LINE = "a Sentinel failover; following it"


async def no_fault(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    return "no fault"


async def worker_kill(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    killed = await asyncio.to_thread(fleet.kill_worker_mid_turn, 0, timeout_s=30)
    return (
        "worker 0 killed mid-turn" if killed == 0 else "worker 0 had no turn in flight: not killed"
    )


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


async def redis_failover(fleet: Fleet, servers: Servers, progress_: LoadResult) -> str:
    cluster = servers.cluster
    assert cluster is not None, "the redis-failover faults run on a Sentinel cluster"
    await next_publish(progress_, host=0)  # right after a publish: the replicas lag it
    await servers.redis_cpu_s()  # the primary's CPU, before it dies with it
    await asyncio.to_thread(cluster.kill_primary)
    promoted_s = await asyncio.to_thread(cluster.wait_promoted)
    claimed_master = await asyncio.to_thread(cluster.restart_old_primary_as_replica)
    lines = _log_count(fleet, FAILOVER_LINE)
    return (
        f"Redis primary killed (SIGKILL) right after a publish, a replica promoted in"
        f" {promoted_s:.1f} s, the old primary back as a replica"
        f"{' (claiming master until a sentinel turned it)' if claimed_master else ''};"
        f" failover lines in the workers' logs {lines}"
    )


Fault = Callable[[Fleet, Servers, LoadResult], Awaitable[str]]


class FaultSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A fault, and what its fleet needs for it."""

    inject: Fault
    sentinel: bool = False  # Redis as a Sentinel cluster (a primary, two lagging replicas)
    publish_wait_replicas: int = 0  # MEMQ_PUBLISH_WAIT_REPLICAS of the hosts' hooks and agents


FAULTS: dict[str, FaultSpec] = {
    "none": FaultSpec(inject=no_fault),
    "worker-kill": FaultSpec(inject=worker_kill),
    "agent-kill": FaultSpec(inject=agent_kill),
    "redis-failover": FaultSpec(inject=redis_failover, sentinel=True),
    "redis-failover-wait1": FaultSpec(
        inject=redis_failover, sentinel=True, publish_wait_replicas=1
    ),
    "postgres-restart": FaultSpec(inject=postgres_restart),
    "chroma-kill": FaultSpec(inject=chroma_kill),
}
