"""A memq fleet on one machine: N `memq worker` processes, M agent hosts, one shared store.

    async with Fleet(tmp_path, redis_url=…, database_url=…, observer=fake_observer,
                     chroma="off", workers=2, hosts=2) as fleet:
        load = asyncio.create_task(fleet.load(seconds=8, rate=4))
        await asyncio.to_thread(fleet.kill_worker_mid_turn, 0)   # a fault, on a schedule
        result = await load
        assert await fleet.settle(result, timeout_s=60)
        report = await fleet.report(result)                      # a FleetReport

Each worker slot has its own MEMQ_DATA_DIR and shares Redis (`redis_url`, any form memq
takes: a Sentinel URL too), PostgreSQL (`database_url`) and `chroma` (`off` or a Chroma
server URL; on, the workers embed with the hash embedding of tests/support/embeddings.py).
Each host has its own data dir and spool and, with `relay`, a `memq agent` its command hooks
hand events to. The fake observer answers in 1-2 s (`PacedObserver`). Servers are the
caller's: the fleet starts and stops only its own processes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType

import asyncpg
from redis.asyncio import Redis
from redis.exceptions import RedisError

from tests.support.fake_observer import FakeObserver
from tests.support.fleet_accounting import (
    FleetReport,
    account,
    dead_event_ids,
    missing_vectors,
    processed_so_far,
    read_store,
    vector_outbox_pending,
)
from tests.support.fleet_load import LoadResult, run_load
from tests.support.fleet_processes import AgentHost, FleetWorker, PacedObserver, with_repo_on_path
from tests.support.worker_process import worker_env
from worker.connect.redis_client import connect_redis
from worker.settings import Settings

HASH_EMBEDDING = "tests.support.embeddings:make_hash_embedding"
JOB_TIMEOUT_S = 9  # a turn may take job timeout - 5 s (4 s: the 1-2 s observer fits); a killed
# worker's turn is retaken ~19 s later (arq keeps its in-progress key job timeout + 10 s)
SPOOL_STUCK_S = 5.0  # spooled events no agent flushed this long: flush them as a hook would


class Fleet:
    """The fleet's processes, its faults, its load and its accounting (an async context)."""

    def __init__(
        self,
        workdir: Path,
        *,
        redis_url: str,
        database_url: str,
        observer: FakeObserver,
        chroma: str = "off",
        workers: int = 2,
        hosts: int = 2,
        relay: bool = True,
        prefix: str = "fleet",
        pace: PacedObserver | None = None,
        worker_settings: Mapping[str, str] | None = None,
        host_settings: Mapping[str, str] | None = None,
        redis_cpu: Callable[[], Awaitable[float | None]] | None = None,
    ) -> None:
        self.workdir = workdir
        self.redis_url = redis_url
        self.database_url = database_url
        self.chroma = chroma
        self.prefix = prefix
        self.relay = relay
        self.pace = pace or PacedObserver()
        observer.responder = self.pace
        (workdir / "logs").mkdir(parents=True, exist_ok=True)
        settings = {"job_timeout_s": str(JOB_TIMEOUT_S), **(worker_settings or {})}
        self.workers = [
            FleetWorker(i, self._worker_env(i, observer, settings), workdir / "logs")
            for i in range(workers)
        ]
        self.hosts = [AgentHost(h, workdir, redis_url, prefix) for h in range(hosts)]
        for host in self.hosts:  # the hooks' and `memq agent`'s (e.g. publish_wait_replicas)
            host.env.update({f"MEMQ_{k.upper()}": v for k, v in (host_settings or {}).items()})
        self.spool_flushes = 0
        self._redis_cpu = redis_cpu or self._info_cpu
        self._redis: Redis | None = None
        self._cpu_at_start: float | None = None
        self._worker_cpu_at_start: dict[int, float] = {}
        self._redis_run_id: str | None = None

    def _worker_env(
        self, index: int, observer: FakeObserver, settings: Mapping[str, str]
    ) -> dict[str, str]:
        data_dir = self.workdir / f"worker-{index}"
        data_dir.mkdir(parents=True, exist_ok=True)
        extra = {"embedding": HASH_EMBEDDING} if self.chroma != "off" else {}
        env = worker_env(
            data_dir, self.redis_url, observer,
            prefix=self.prefix, database_url=self.database_url, chroma=self.chroma,
            model=f"fleet-w{index}", **extra, **settings,
        )  # fmt: skip
        return with_repo_on_path(env)

    @property
    def redis(self) -> Redis:
        """The fleet's own client on Redis (it follows a Sentinel failover like memq's)."""
        assert self._redis is not None, "use the fleet inside `async with`"
        return self._redis

    async def __aenter__(self) -> Fleet:
        self._redis = await connect_redis(Settings(redis_url=self.redis_url, prefix=self.prefix))
        try:
            for worker in self.workers:
                worker.start()
            # Everything starts at once: on a loaded machine start-up is most of a short run.
            ready = [asyncio.to_thread(w.wait_ready) for w in self.workers]
            if self.relay:
                ready += [asyncio.to_thread(h.start_agent) for h in self.hosts]
            await asyncio.gather(*ready)
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop every process the fleet started, then close its Redis client."""
        for host in self.hosts:
            await asyncio.to_thread(host.stop_agent)
        for worker in self.workers:
            await asyncio.to_thread(worker.stop)
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    # -- faults ------------------------------------------------------------------------------

    def kill_worker(self, index: int, *, restart: bool = True) -> None:
        """`kill -9` worker slot `index`, and start a new process there (a supervisor would)."""
        self.workers[index].kill()
        if restart:
            self.workers[index].start()

    def kill_worker_mid_turn(
        self, index: int | None = None, *, timeout_s: float = 30.0, restart: bool = True
    ) -> int | None:
        """`kill -9` worker `index` (None: whichever worker's turn reaches the observer first)
        while one of its turns waits on the observer; the index killed.

        None (and no kill) if no such turn reached the observer within `timeout_s`.
        """
        slots = self.workers if index is None else [self.workers[index]]
        model = self.pace.wait_in_flight([w.model for w in slots], timeout_s)
        if model is None:
            return None
        killed = next(w.index for w in slots if w.model == model)
        self.kill_worker(killed, restart=restart)
        return killed

    def restart_worker(self, index: int) -> None:
        """Start slot `index` again after `kill_worker(…, restart=False)`."""
        self.workers[index].start()

    def kill_agent(self, host: int) -> None:
        """`kill -9` host `host`'s `memq agent`; its hooks publish or spool by themselves."""
        self.hosts[host].kill_agent()

    def restart_agent(self, host: int) -> None:
        """Start host `host`'s `memq agent` again (it flushes what it spooled before)."""
        self.hosts[host].start_agent()

    # -- load and accounting -----------------------------------------------------------------

    async def load(
        self,
        *,
        seconds: float,
        rate: float,
        sessions_per_host: int = 2,
        run: str | None = None,
        into: LoadResult | None = None,
    ) -> LoadResult:
        """Publish about `rate` calls a second for `seconds` through every host's hooks
        (`into`, when given, fills as they are published)."""
        self._cpu_at_start = await self._redis_cpu()
        # Startup (imports, connecting) is not the run's work; a restart's is, and counts.
        self._worker_cpu_at_start = {w.index: w.cpu_s() for w in self.workers}
        return await run_load(
            [h.env for h in self.hosts],
            seconds=seconds,
            rate=rate,
            sessions_per_host=sessions_per_host,
            run=run or f"r{uuid.uuid4().hex[:6]}",
            into=into,
        )

    async def settle(self, load: LoadResult, *, timeout_s: float, vectors: bool = True) -> bool:
        """Wait until every published call is processed or dead-lettered (and, with Chroma and
        `vectors`, every observation of the load's sessions is in the index); False after
        `timeout_s`.

        The index is asked, not the outbox: a row indexed whose outbox row could not be
        marked done (the store went down in between) has its vectors, and its outbox row
        waits out its claim (`vector_outbox_pending` in the report counts those).
        Spooled events that no running agent publishes within SPOOL_STUCK_S are flushed with
        `memq spool flush`, which is what the host's next hook run would do.
        """
        ids = [p.event_id for p in load.published]
        sessions = sorted({p.session for p in load.published})
        deadline = time.monotonic() + timeout_s
        stuck_since: dict[int, float] = {}
        while time.monotonic() < deadline:
            await self._flush_stuck_spools(stuck_since)
            if await self._done(ids, sessions, vectors=vectors):
                return True
            await asyncio.sleep(0.25)
        return False

    async def _flush_stuck_spools(self, stuck_since: dict[int, float]) -> None:
        now = time.monotonic()
        for host in self.hosts:
            if host.spooled_lines() == 0:
                stuck_since.pop(host.index, None)
                continue
            since = stuck_since.setdefault(host.index, now)
            if now - since >= SPOOL_STUCK_S:
                await asyncio.to_thread(host.flush_spool)
                self.spool_flushes += 1
                stuck_since.pop(host.index, None)

    async def _done(self, ids: list[str], sessions: list[str], *, vectors: bool) -> bool:
        try:
            processed, rows = await processed_so_far(self.database_url, ids, sessions)
            dead = await dead_event_ids(self.redis, self.prefix)
        except (OSError, asyncpg.PostgresError, RedisError):
            return False  # PostgreSQL or Redis down for a fault: ask again
        if processed + len(dead & set(ids)) < len(ids):
            return False
        if self.chroma == "off" or not vectors:
            return True
        try:
            return await asyncio.to_thread(missing_vectors, self.chroma, self.prefix, rows) == 0
        except Exception:  # chromadb raises its own types (and httpx's) while it is down
            return False

    async def report(self, load: LoadResult) -> FleetReport:
        """The accounting of one load run (call after `settle`)."""
        sessions = sorted({p.session for p in load.published})
        store = await read_store(self.database_url, sessions)
        dead = await dead_event_ids(self.redis, self.prefix)
        missing = None
        if self.chroma != "off":
            ids = [row[0] for row in store.observations]
            missing = await asyncio.to_thread(missing_vectors, self.chroma, self.prefix, ids)
        outbox_pending = await vector_outbox_pending(self.database_url)
        cpu_end = await self._redis_cpu()
        start = self._cpu_at_start
        return account(
            load.published, store, dead,
            missing=missing,
            hook_failures=len(load.failures),
            worker_cpu_s={
                f"w{w.index}": w.cpu_s() - self._worker_cpu_at_start.get(w.index, 0.0)
                for w in self.workers
            },
            worker_starts={f"w{w.index}": w.starts for w in self.workers},
            redis_cpu_s=None if start is None or cpu_end is None else cpu_end - start,
            spool_flushes=self.spool_flushes,
            observer_order_problems=self.pace.order_problems(set(sessions)),
            vector_outbox_pending=outbox_pending,
        )  # fmt: skip

    async def _info_cpu(self) -> float | None:
        """Redis's own CPU seconds (INFO cpu) on the server the client reaches now; None when
        it changed since the run started (a failover), since the two counters do not add."""
        info = await self.redis.info("server")
        cpu = await self.redis.info("cpu")
        run_id = str(info.get("run_id"))
        if self._redis_run_id is None:
            self._redis_run_id = run_id
        elif self._redis_run_id != run_id:
            return None
        return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
