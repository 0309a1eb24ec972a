"""The servers of one bench/fleet.py fleet: Redis (plain, or a Sentinel cluster), a Chroma
server, a PostgreSQL database; and the CPU the redis-server processes spend."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.common import process_cpu_s
from tests.support.ports import free_port, wait_for_port
from tests.support.postgres_server import PostgresServer
from tests.support.redis_failover import FLEET_LAG_MS
from tests.support.redis_server import RedisServer
from tests.support.sentinel_cluster import SentinelCluster


class RedisCpu:
    """CPU seconds of every redis-server a fleet ran, a killed one's as last sampled."""

    def __init__(self) -> None:
        self._last: dict[int, float] = {}

    def sample(self, pids: list[int]) -> float:
        """Read the live processes again; the total over every process seen."""
        for pid in pids:
            cpu = process_cpu_s(pid)
            if cpu:  # 0 once a process is gone: keep what it had used
                self._last[pid] = cpu
        return sum(self._last.values())


class Servers:
    """Redis, Chroma and the database of one fault's fleet; the fault reaches them here.

    With `sentinel`, Redis is a Sentinel cluster: a primary and two replicas, each
    FLEET_LAG_MS behind it (a slow link, so asynchronous replication has a window to lose
    in), and three sentinels; memq takes its `redis+sentinel://` URL.
    """

    def __init__(
        self, root: Path, postgres: PostgresServer, database_url: str, *, sentinel: bool
    ) -> None:
        self.root = root
        self.postgres = postgres
        self.database_url = database_url
        self.cluster: SentinelCluster | None = None
        self.redis: RedisServer | None = None
        if sentinel:
            self.cluster = SentinelCluster(
                root / "redis", replicas=2, replica_delay_ms=FLEET_LAG_MS
            )
            self.cluster.start()
        else:
            self.redis = RedisServer(root / "redis", appendonly=True).start()
        self._redis_cpu = RedisCpu()
        self.chroma_port = free_port()
        self.chroma: subprocess.Popen[bytes] | None = None
        self.start_chroma()

    @property
    def redis_url(self) -> str:
        """The URL memq takes: the server's, or the sentinels'."""
        if self.cluster is not None:
            return self.cluster.url
        assert self.redis is not None
        return self.redis.url

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

    def _redis_pids(self) -> list[int]:
        procs = (
            [n.proc for n in self.cluster.nodes]
            if self.cluster is not None
            else [self.redis.proc if self.redis is not None else None]
        )
        return [p.pid for p in procs if p is not None and p.poll() is None]

    async def redis_cpu_s(self) -> float | None:
        """CPU seconds of the redis-server processes (the sentinels not counted) so far."""
        return self._redis_cpu.sample(self._redis_pids())

    def stop(self) -> None:
        if self.chroma is not None:
            self.chroma.kill()
            self.chroma.wait(10)
        if self.cluster is not None:
            self.cluster.stop()
        if self.redis is not None:
            self.redis.stop()
