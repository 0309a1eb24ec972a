"""A Redis primary, its replicas and three sentinels on free loopback ports, for failover faults.

Each server and each sentinel has its own temp dir (a sentinel rewrites its config file, so
each needs its own). The timings are fast so that a failover fits in a test: a primary is
down after `DOWN_AFTER_MS` and promoted within a few seconds. `SentinelCluster` is used both
by the fault tests and by `bench/`, so it depends on nothing from pytest.

`replica_delay_ms` > 0 routes each replica's link through a `DelayLink`, a relay that holds
each chunk for that long in both directions: the replicas are then that far behind, as over
a slow network, and `kill_primary` drops what the links still hold (the primary's host is
gone with it), which is how asynchronous replication loses acknowledged writes. With two
replicas, the promoted one still has a replica after a failover (what a publish that waits
for one, MEMQ_PUBLISH_WAIT_REPLICAS=1, needs).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.support.delay_link import DelayLink
from tests.support.ports import free_port, wait_for_port

MASTER = "mymaster"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000


class FailoverError(RuntimeError):
    """The cluster did not reach the state a step waits for in time."""


class RedisNode:
    """One redis-server (no persistence: a restarted node takes its data from its primary)."""

    def __init__(self, workdir: Path, name: str) -> None:
        self.workdir = workdir / name
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, replica_of: int | None = None) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            _exe("redis-server"),
            "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
            "--save", "", "--appendonly", "no",
            "--repl-diskless-sync-delay", "0",  # the default waits 5 s for more replicas
            "--logfile", str(self.workdir / "redis.log"),
        ]  # fmt: skip
        if replica_of is not None:
            # Announce the real port: with a delay link the primary sees the relay's port.
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
            args += ["--replica-announce-ip", "127.0.0.1"]
            args += ["--replica-announce-port", str(self.port)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def replication(self) -> dict[str, object]:
        """INFO replication, or {} while the node does not answer."""
        try:
            with self.client() as c:
                info: dict[str, object] = c.info("replication")
                return info
        except (redis.RedisError, OSError):
            return {}


class SentinelProcess:
    """One `redis-server --sentinel` watching `MASTER`, quorum 2."""

    def __init__(self, workdir: Path, index: int) -> None:
        self.workdir = workdir / f"sentinel-{index}"
        self.port = free_port()
        self.myid = f"{index + 1:040x}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, master_port: int, replicas: list[int], others: list[SentinelProcess]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "sentinel.conf"
        # Naming the replica and the other sentinels up front saves the ~10 s a sentinel
        # takes to discover them (INFO and hello periods); it checks them as usual after.
        known = "".join(
            f"sentinel known-sentinel {MASTER} 127.0.0.1 {o.port} {o.myid}\n" for o in others
        ) + "".join(f"sentinel known-replica {MASTER} 127.0.0.1 {port}\n" for port in replicas)
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.workdir}\n"
            f"logfile {self.workdir / 'sentinel.log'}\nsentinel myid {self.myid}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {master_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n{known}"
        )
        self.proc = subprocess.Popen(
            [_exe("redis-server"), str(config), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def master_port(self) -> int | None:
        """The port this sentinel names as the master, None while it does not answer."""
        try:
            with self.client() as c:
                addr = c.execute_command("SENTINEL", "get-master-addr-by-name", MASTER)
        except (redis.RedisError, OSError):
            return None
        return int(addr[1]) if addr else None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


class SentinelCluster:
    """A primary, `replicas` replicas and three sentinels; `url` is the `redis+sentinel://` URL
    memq takes."""

    def __init__(self, workdir: Path, *, replicas: int = 1, replica_delay_ms: int = 0) -> None:
        self.nodes = [RedisNode(workdir, f"redis-{chr(97 + i)}") for i in range(1 + replicas)]
        self.sentinels = [SentinelProcess(workdir, i) for i in range(3)]
        self.replica_delay_ms = replica_delay_ms
        self.links: list[DelayLink] = []
        self.killed: RedisNode | None = None
        self.failovers = 0

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def start(self, timeout_s: float = 30.0) -> SentinelCluster:
        primary, *replicas = self.nodes
        primary.start()
        for replica in replicas:
            upstream = primary.port
            if self.replica_delay_ms:
                link = DelayLink(primary.port, self.replica_delay_ms / 1000)
                self.links.append(link)
                upstream = link.port
            replica.start(replica_of=upstream)
        self._wait(
            lambda: all(r.replication().get("master_link_status") == "up" for r in replicas),
            timeout_s,
        )
        ports = [r.port for r in replicas]
        for s in self.sentinels:
            s.start(primary.port, ports, [o for o in self.sentinels if o is not s])
        # A failover needs a quorum that knows the replica and each other (hello messages).
        self._wait(lambda: all(self._sentinel_ready(s) for s in self.sentinels), timeout_s)
        return self

    def primary(self) -> RedisNode:
        """The node the sentinels name as master."""
        port = self.sentinels[0].master_port()
        return next(n for n in self.nodes if n.port == port)

    def replica(self) -> RedisNode:
        """The first node that is not the master (nor the one killed)."""
        primary = self.primary()
        return next(n for n in self.nodes if n is not primary and n is not self.killed)

    def kill_primary(self) -> RedisNode:
        """`kill -9` the primary; with a delay link, what it still holds is lost too."""
        victim = self.primary()
        victim.kill()
        for link in self.links:
            link.sever()  # the bytes still on the slow links die with the primary's host
        self.killed = victim
        return victim

    def switch_over(self, timeout_s: float = 30.0) -> RedisNode:
        """A graceful failover (`SENTINEL FAILOVER`): the primary lives on, demoted to a
        replica, so clients still connected to it get READONLY errors. Returns the old one."""
        old = self.primary()
        with self.sentinels[0].client() as c:
            c.execute_command("SENTINEL", "FAILOVER", MASTER)
        self._wait(
            lambda: (
                all(s.master_port() not in (None, old.port) for s in self.sentinels)
                and old.replication().get("role") == "slave"
            ),
            timeout_s,
        )
        self.failovers += 1
        return old

    def wait_promoted(self, timeout_s: float = 30.0) -> float:
        """Block until every sentinel names the replica and it says it is master; seconds waited."""
        assert self.killed is not None, "kill_primary first"
        started = time.monotonic()
        killed = self.killed

        def promoted() -> bool:
            named = {s.master_port() for s in self.sentinels}
            if len(named) != 1 or None in named or killed.port in named:
                return False
            new = next(n for n in self.nodes if n.port in named)
            return new.replication().get("role") == "master"

        self._wait(promoted, timeout_s)
        self.failovers += 1
        return time.monotonic() - started

    def restart_old_primary_as_replica(self, timeout_s: float = 60.0) -> bool:
        """Start the killed node again on its port; block until sentinel made it a replica.

        Returns whether it was seen claiming to be a master first: it starts as one (its
        own config has no `replicaof`) until a sentinel reconfigures it.
        """
        old = self.killed
        assert old is not None, "kill_primary first"
        old.start()
        claimed_master = old.replication().get("role") == "master"

        def following() -> bool:
            # The primary now, read at each look: on a starved machine the sentinels may fail
            # over once more (the promoted primary judged down), and it follows that one.
            info = old.replication()
            return (
                info.get("role") == "slave"
                and info.get("master_port") == self.sentinels[0].master_port()
                and info.get("master_link_status") == "up"
            )

        # A sentinel converts it once it has said `master` for 8 s (4 hello periods) and its
        # next INFO is read: ~10-20 s, longer on a loaded machine.
        self._wait(following, timeout_s, lambda: f"the old primary: {old.replication()}")
        self.killed = None
        return claimed_master

    def switches(self) -> int:
        """Failovers the sentinels carried out so far, as the first one logged them (its
        `+switch-master` lines): the ones this cluster caused and any it did not."""
        log = self.sentinels[0].workdir / "sentinel.log"
        return log.read_text(errors="replace").count("+switch-master") if log.exists() else 0

    def stop(self) -> None:
        """Stop everything (sentinels first, so none starts a failover on the way out)."""
        for s in self.sentinels:
            s.stop()
        for link in self.links:
            link.sever()
        for n in self.nodes:
            n.kill()

    def __enter__(self) -> SentinelCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _sentinel_ready(self, s: SentinelProcess) -> bool:
        try:
            with s.client() as c:
                state = c.execute_command("SENTINEL", "MASTER", MASTER)
        except (redis.RedisError, OSError):
            return False
        fields = dict(zip(state[::2], state[1::2], strict=True))
        replicas = len(self.nodes) - 1
        return int(fields[b"num-slaves"]) >= replicas and int(fields[b"num-other-sentinels"]) >= 2

    @staticmethod
    def _wait(
        condition: Callable[[], bool], timeout_s: float, state: Callable[[], str] = str
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise FailoverError(
                    f"the Redis cluster did not get there in {timeout_s}s: {state()}"
                )
            time.sleep(0.05)


def _exe(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} missing: scripts/test installs Debian's redis-server")
    return path
