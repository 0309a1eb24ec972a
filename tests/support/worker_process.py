"""`memq worker` as an OS process with an explicit environment, for kill and multi-process tests."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from redis.asyncio import Redis

from tests.support.fake_observer import FakeObserver
from tests.support.ingest import console_script, subprocess_env


def worker_env(
    data_dir: Path, redis_url: str, fake: FakeObserver, provider: str = "anthropic", **memq: str
) -> dict[str, str]:
    """The environment of a worker process: the test's Redis, data dir and fake observer.

    `memq` keys are MEMQ_* settings without the prefix (`job_timeout_s="6"`).
    """
    extra = {
        "MEMQ_OBSERVER": provider,
        "MEMQ_MODEL": "test-model",
        "MEMQ_BATCH_WAIT_MS": "0",
        "MEMQ_BATCH_MAX_WAIT_S": "0",
        "MEMQ_RETRY_BASE_S": "0.05",
        "MEMQ_RETRY_MAX_S": "0.2",
        "MEMQ_OBSERVER_TIMEOUT_S": "30",
        "MEMQ_LOG_FORMAT": "json",
        # The vector sync loads a 90 MB model per process; worker-process tests are about
        # streams and outcomes (tests/worker/search/test_vectors.py covers the sync).
        "MEMQ_CHROMA": "off",
        **{f"MEMQ_{k.upper()}": v for k, v in memq.items()},
    }
    if provider == "anthropic":
        extra |= {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.url}
    else:
        extra |= {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": fake.openai_url}
    return subprocess_env(data_dir, redis_url, **extra)


class WorkerProcess:
    """One running `memq worker`; its stderr (JSON logs) goes to a file for post-mortems."""

    def __init__(self, env: dict[str, str], log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [console_script(), "worker", *args],
            env=env,
            cwd=env["MEMQ_DATA_DIR"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    def log(self) -> str:
        """Everything the process wrote so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout_s: float = 15.0) -> None:
        """Block until the log contains `text` (e.g. that the worker started polling)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log():
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker log has no {text!r} after {timeout_s}s:\n{self.log()}")
            time.sleep(0.05)

    def signal(self, sig: signal.Signals) -> None:
        """Send a signal to the process (and only to it)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout_s: float) -> int:
        """Wait for the process to exit; returns its exit code."""
        return self.proc.wait(timeout_s)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; closes the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


@contextmanager
def worker_processes(
    env: dict[str, str], log_dir: Path, count: int = 1, *args: str
) -> Iterator[list[WorkerProcess]]:
    """Start `count` workers; every one is stopped on the way out, whatever happened."""
    workers: list[WorkerProcess] = []
    try:
        for i in range(count):
            workers.append(WorkerProcess(env, log_dir / f"worker-{i}.log", *args))
        yield workers
    finally:
        for w in workers:
            w.stop()


async def forget_cron_jobs(redis: Redis, prefix: str) -> None:
    """Drop the sweep runs a stopped worker process queued ahead: the in-process burst
    worker of the harness runs without the cron, and would fail them as unknown."""
    queue = f"{prefix}:queue"
    for job_id in await redis.zrange(queue, 0, -1):
        if job_id.decode().startswith(f"{prefix}:cron:"):
            await redis.zrem(queue, job_id)
