"""A real memq behind a real agent: redis-server, a `memq worker` process, the fake observer.

The agent runs as a subprocess with its own HOME (settings, transcripts) and a git project
`webapp` in it; its hooks call the installed `memq` console script with this stack's Redis
and data dir, and `memq agent` can serve its HTTP hooks. Assertions read the worker's SQLite
store and Redis.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import redis

from tests.support.fake_observer import FakeObserver
from tests.support.ingest import console_script, subprocess_env
from tests.support.ports import free_port
from tests.support.worker_checks import dropped_rows, stored_rows
from tests.support.worker_harness import make_settings
from tests.support.worker_process import WorkerProcess, worker_env
from worker.private_files import PRIVATE_UMASK
from worker.settings import Settings
from worker.storage.factory import open_store
from worker.storage.records import DroppedRow, StoredRow

PROJECT_FILES = {
    "README.md": "# webapp\n\nA tiny shop backend.\n",
    "src/cart.py": "def total(prices):\n    return round(sum(prices) * 0.9, 2)\n",
    "tests/test_cart.py": (
        "from src.cart import total\n\n\ndef test_total():\n    assert total([50]) == 50\n"
    ),
}


class AgentStack:
    """memq's side of a real-agent test; `env()` is what the agent (and so its hooks) runs with."""

    def __init__(self, root: Path, redis_url: str, observer: FakeObserver) -> None:
        self.home = root / "home"
        self.project = self.home / "webapp"
        self.data_dir = self.home / ".memq"
        self.redis_url = redis_url
        self.observer = observer
        self.memq = console_script()
        self.settings: Settings = make_settings(self.data_dir, redis_url, observer.url)
        self._root = root
        self._processes: list[subprocess.Popen[bytes]] = []
        self.worker: WorkerProcess | None = None
        self._agent_logs: list[Path] = []
        for rel, text in PROJECT_FILES.items():
            path = self.project / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _git(self.project, "init", "-q")

    def env(self, **extra: str) -> dict[str, str]:
        """The agent's environment: its HOME, memq's Redis and data dir, no network but loopback."""
        node_dir = str(Path(shutil.which("node") or "/usr/bin/node").parent)
        env = subprocess_env(
            self.data_dir, self.redis_url, MEMQ_CHROMA="off", TERM="dumb", USER="dev",
            NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
        )  # fmt: skip
        env["HOME"] = str(self.home)
        env["PATH"] = f"{Path(self.memq).parent}:{node_dir}:/usr/local/bin:/usr/bin:/bin"
        env.update(extra)
        return env

    def run_memq(
        self, *args: str, stdin: str = "", timeout_s: float = 60, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run the memq CLI as the agent's user would (same HOME, Redis and data dir)."""
        return subprocess.run(
            [self.memq, *args], input=stdin, capture_output=True, text=True, timeout=timeout_s,
            cwd=self.project, env=self.env(**env), check=False,
        )  # fmt: skip

    def start_worker(self, *, ready: bool = True, **memq: str) -> WorkerProcess:
        """`memq worker` on this stack (one per stack); with `ready`, once it polls Redis."""
        env = worker_env(self.data_dir, self.redis_url, self.observer, **memq)
        self.worker = WorkerProcess(env, self._root / "worker.log")
        if ready:
            self.worker.wait_for_log("redis_version", timeout_s=30)
        return self.worker

    def create_store(self) -> None:
        """The empty, migrated store a first worker run makes (memq's MCP search needs one to
        answer), made here rather than by starting and stopping a worker process."""

        async def make() -> None:
            store = open_store(self.settings)
            try:
                await store.migrate()
            finally:
                await store.aclose()

        umask = os.umask(PRIVATE_UMASK)  # private, as the worker's own files are
        try:
            # A thread of its own: async tests build stacks inside their running loop.
            with ThreadPoolExecutor(1) as pool:
                pool.submit(asyncio.run, make()).result()
        finally:
            os.umask(umask)

    def start_agent_endpoint(self) -> str:
        """`memq agent` on a free loopback port; returns its base URL (`http://127.0.0.1:N`)."""
        port = free_port()
        self._agent_logs.append(self._root / f"agent-{port}.log")
        with self._agent_logs[-1].open("wb") as log:  # the child keeps its own fd
            proc = subprocess.Popen(
                [self.memq, "agent"], env=self.env(MEMQ_AGENT_PORT=str(port)), cwd=self.data_dir,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self._processes.append(proc)
        url = f"http://127.0.0.1:{port}"
        _wait_for_http(url + "/healthz", proc)
        return url

    def stored(self, session: str | None = None) -> list[StoredRow]:
        """Every stored observation and summary (of one session)."""
        return asyncio.run(stored_rows(self.settings, session))

    def dropped(self) -> list[DroppedRow]:
        """Every kept dropped reply."""
        return asyncio.run(dropped_rows(self.settings))

    def wait_for(
        self, *, observations: int, summaries: int = 0, timeout_s: float = 60
    ) -> list[StoredRow]:
        """Block until the store holds at least that many rows of each kind; return them all."""
        deadline = time.monotonic() + timeout_s
        rows: list[StoredRow] = []
        while time.monotonic() < deadline:
            if self.worker is not None and self.worker.proc.poll() is not None:
                break  # the worker exited: say so now, with its log
            rows = self.stored() if (self.data_dir / "memq.db").exists() else []
            got_obs = sum(r.kind == "observation" for r in rows)
            got_sum = sum(r.kind == "summary" for r in rows)
            if got_obs >= observations and got_sum >= summaries:
                return rows
            time.sleep(0.2)
        log = self.worker.log()[-4000:] if self.worker else ""
        agents = "".join(
            f"\n{p.name}:\n{p.read_text(errors='replace')[-3000:]}" for p in self._agent_logs
        )
        raise AssertionError(
            f"store has {rows!r}, wanted {observations} observations and {summaries} summaries;"
            f" worker log tail:\n{log}{agents}"
        )

    def close(self) -> None:
        """Stop the worker and every `memq agent` this stack started."""
        for proc in self._processes:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if self.worker is not None:
            self.worker.stop()


@contextmanager
def agent_stack(
    root: Path, redis_url: str, observer: FakeObserver, *, worker: bool = True
) -> Iterator[AgentStack]:
    """An AgentStack with its worker running (unless `worker` is false); everything stopped
    on the way out."""
    # A fresh memq: no counters, streams or pauses left by the previous test.
    client = redis.Redis.from_url(redis_url)
    try:
        client.flushdb()
    finally:
        client.close()
    stack = AgentStack(root, redis_url, observer)
    try:
        if worker:
            # The store at once (hooks and `memq mcp` read it), and the worker boots while the
            # test sets up and runs its agent: the events wait in Redis until it polls.
            stack.create_store()
            stack.start_worker(ready=False)
        yield stack
    finally:
        stack.close()


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={**os.environ, "HOME": str(cwd)},
    )


def _wait_for_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 20) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout_s}s")
