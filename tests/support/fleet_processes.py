"""The processes of a fleet: `memq worker` slots, agent hosts with `memq agent`, a paced observer.

A worker slot keeps its data dir and its observer model name (`fleet-w<i>`) across restarts,
so the fake observer can tell which worker a request came from and a stored row's `model`
which worker stored it. An agent host is a data dir, a spool and a `memq agent` port shared
by its command hooks.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from pipeline.prompting.prompts import RECORDED_ELEMENT
from tests.support.fake_observer import RecordedRequest, Reply, deterministic_reply
from tests.support.ingest import REPO, console_script, subprocess_env
from tests.support.ports import free_port
from tests.support.worker_process import WorkerProcess

# A call's command (tests/support/fleet_load.py): `echo step-0007 <session>`.
_STEP = re.compile(r"step-(\d{4}) ([\w-]+)")
# The titles a prompt lists as recorded already name earlier steps: not calls of this turn.
_RECORDED = re.compile(rf"<{RECORDED_ELEMENT}>.*?</{RECORDED_ELEMENT}>", re.DOTALL)


def proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used; 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_repo_on_path(env: dict[str, str]) -> dict[str, str]:
    """`env` with this tree importable, for MEMQ_EMBEDDING=tests.support.embeddings:…"""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(REPO) not in paths:
        paths.append(str(REPO))
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def worker_model(index: int) -> str:
    """The observer model worker slot `index` asks for."""
    return f"fleet-w{index}"


class PacedObserver:
    """The fake observer's responder: deterministic replies after `low_s`..`high_s` seconds.

    It counts the calls in flight per model (that is, per worker slot), so a test can kill a
    worker while one of its turns waits on the observer.
    """

    def __init__(self, low_s: float = 1.0, high_s: float = 2.0, seed: int = 19) -> None:
        self.low_s, self.high_s = low_s, high_s
        self._rng = random.Random(seed)
        self._lock = threading.Condition()
        self._in_flight: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._asked: list[tuple[str, list[int]]] = []  # (session, steps) per call, as received

    def __call__(self, request: RecordedRequest) -> Reply:
        model = str(request.body.get("model", ""))
        steps: dict[str, list[int]] = {}
        for step, session in _STEP.findall(_RECORDED.sub("", request.user)):
            steps.setdefault(session, []).append(int(step))
        with self._lock:
            self._asked += list(steps.items())
            delay = self._rng.uniform(self.low_s, self.high_s)
            self._in_flight[model] += 1
            self.calls[model] += 1
            self._lock.notify_all()
        try:
            time.sleep(delay)  # the handler thread waits, as for a provider's answer
            return deterministic_reply(request)
        finally:
            with self._lock:
                self._in_flight[model] -= 1

    def order_problems(self, sessions: set[str]) -> list[str]:
        """Calls that showed a session's steps out of order, or skipped ahead of a step the
        observer had not been shown yet (a retried turn may show steps again)."""
        shown_up_to: dict[str, int] = {}
        problems = []
        with self._lock:
            asked = list(self._asked)
        for session, steps in asked:
            if session not in sessions:
                continue
            if steps != list(range(steps[0], steps[0] + len(steps))):
                problems.append(f"{session}: one call showed steps {steps}")
            if steps[0] > shown_up_to.get(session, -1) + 1:
                problems.append(f"{session}: step {steps[0]} shown before {steps[0] - 1}")
            shown_up_to[session] = max(shown_up_to.get(session, -1), steps[-1])
        return problems

    def in_flight(self, model: str) -> int:
        """Calls of `model` received and not yet answered."""
        with self._lock:
            return self._in_flight[model]

    def wait_in_flight(self, models: list[str], timeout_s: float) -> str | None:
        """Block until a call of one of `models` is in flight: that model (the first listed of
        those in flight); None after `timeout_s`."""

        def flying() -> str | None:
            return next((m for m in models if self._in_flight[m] > 0), None)

        with self._lock:
            return self._lock.wait_for(flying, timeout_s)


class FleetWorker:
    """One worker slot: a `memq worker` process, killed and started again like a supervisor."""

    def __init__(self, index: int, env: dict[str, str], log_dir: Path) -> None:
        self.index = index
        self.env = env
        self.log_dir = log_dir
        self.starts = 0
        self.kills = 0
        self._spent_cpu_s = 0.0  # CPU of the incarnations that are gone
        self.proc: WorkerProcess | None = None

    @property
    def model(self) -> str:
        """The observer model this slot's worker asks for."""
        return worker_model(self.index)

    def start(self) -> None:
        """Start a new `memq worker` in this slot (its log: worker-<i>-<n>.log)."""
        assert self.proc is None or self.proc.proc.poll() is not None, "slot already running"
        self.starts += 1
        log = self.log_dir / f"worker-{self.index}-{self.starts}.log"
        self.proc = WorkerProcess(self.env, log)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Block until the worker has connected and polls (it logs Redis's version)."""
        assert self.proc is not None
        self.proc.wait_for_log("redis_version", timeout_s)

    def alive(self) -> bool:
        """Whether the slot's process runs."""
        return self.proc is not None and self.proc.proc.poll() is None

    def kill(self) -> None:
        """`kill -9` the worker (its turns in flight are cut off where they are)."""
        assert self.proc is not None
        self._spent_cpu_s += proc_cpu_s(self.proc.pid)
        self.proc.signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stop()
        self.kills += 1

    def stop(self) -> None:
        """SIGTERM the worker and wait for it (a clean shutdown)."""
        if self.proc is None:
            return
        self._spent_cpu_s += proc_cpu_s(self.proc.pid)
        self.proc.stop()

    def cpu_s(self) -> float:
        """CPU seconds used by every process this slot ran."""
        live = proc_cpu_s(self.proc.pid) if self.alive() and self.proc is not None else 0.0
        return self._spent_cpu_s + live


class AgentHost:
    """An agent host: its data dir and spool, its command hooks' environment, `memq agent`."""

    def __init__(self, index: int, root: Path, redis_url: str, prefix: str) -> None:
        self.index = index
        self.data_dir = root / f"host-{index}"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        # The hook relays only to an agent of the same memq: the same URL, data dir, prefix
        # and project, so both get exactly this environment.
        self.env = subprocess_env(
            self.data_dir, redis_url,
            MEMQ_PREFIX=prefix, MEMQ_PROJECT=f"fleet-h{index}", MEMQ_AGENT_PORT=str(self.port),
        )  # fmt: skip
        self.agent: subprocess.Popen[bytes] | None = None
        self.agent_starts = 0
        self.agent_kills = 0

    @property
    def agent_url(self) -> str:
        """The base URL of this host's `memq agent`."""
        return f"http://127.0.0.1:{self.port}"

    def start_agent(self, timeout_s: float = 60.0) -> None:
        """Start `memq agent` and wait until /healthz answers 200."""
        assert not self.agent_running(), "the agent already runs"
        self.agent_starts += 1
        log = (self.data_dir / f"agent-{self.agent_starts}.log").open("wb")
        self.agent = subprocess.Popen(
            [console_script(), "agent"], env=self.env, cwd=self.data_dir,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.agent.poll() is not None:
                raise AssertionError(f"memq agent exited with {self.agent.returncode}")
            try:
                if httpx.get(f"{self.agent_url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"memq agent on host {self.index} not healthy after {timeout_s}s")

    def agent_running(self) -> bool:
        """Whether this host's `memq agent` runs."""
        return self.agent is not None and self.agent.poll() is None

    def kill_agent(self) -> None:
        """`kill -9` the agent: its hooks fall back to their own path until it is back."""
        assert self.agent is not None
        self.agent.kill()
        self.agent.wait(10)
        self.agent_kills += 1

    def stop_agent(self) -> None:
        """SIGTERM the agent (it publishes or spools what it holds) and wait for it."""
        if self.agent is not None and self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(20)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(5)

    def flush_spool(self) -> str:
        """`memq spool flush` on this host (what its next hook run would do); its output."""
        done = subprocess.run(
            [console_script(), "spool", "flush"], env=self.env, cwd=self.data_dir,
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return (done.stdout + done.stderr).strip()

    def spooled_lines(self) -> int:
        """Events waiting in this host's spool (appended and mid-flush; 0 when there is none)."""
        spool = self.data_dir / "spool"
        names = ("events.jsonl", "events.flushing.jsonl")
        return sum((spool / n).read_bytes().count(b"\n") for n in names if (spool / n).exists())
