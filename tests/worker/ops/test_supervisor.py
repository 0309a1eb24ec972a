"""The supervisor with real child processes: crash loops back off, a stuck child is killed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.ingest import subprocess_env
from worker.ops.supervisor import RESTART_BACKOFF, restart_delay_s

# The supervisor runs in a process of its own: it owns SIGTERM/SIGINT while it runs.
DRIVER = """
import sys
from worker.logs import configure_logging
from worker.ops.supervisor import Supervisor
configure_logging("json")
child = [sys.executable, "-c", sys.argv[1]]
Supervisor([child], stop_timeout_s=float(sys.argv[2]), done_on_success=sys.argv[3] == "burst").run()
"""
IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


class Driven:
    """A supervisor process of one child running `code`; its output and the children's in a file."""

    def __init__(self, tmp_path: Path, code: str, *, stop_timeout_s: float, burst: bool) -> None:
        self.path = tmp_path / "supervisor.log"
        self.code = code
        with self.path.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", DRIVER, code, str(stop_timeout_s), "burst" * burst],
                env=subprocess_env(tmp_path),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.path.read_text(errors="replace")

    def events(self, event: str) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in self.text().splitlines() if line.startswith("{")]
        return [r for r in lines if r["event"] == event]

    def wait_for(self, text: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.text():
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.text()}"
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill the supervisor if it still runs, and any child it left behind."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for started in self.events("worker process started"):
            with contextlib.suppress(OSError):  # gone already
                # Only a process still running our child's code: a pid may have been reused.
                cmdline = Path(f"/proc/{started['pid']}/cmdline").read_bytes()
                if self.code.encode() in cmdline:
                    os.kill(started["pid"], signal.SIGKILL)


@contextmanager
def supervising(
    tmp_path: Path, code: str, *, stop_timeout_s: float, burst: bool
) -> Iterator[Driven]:
    """A Driven supervisor, killed on the way out if a test left it running."""
    sup = Driven(tmp_path, code, stop_timeout_s=stop_timeout_s, burst=burst)
    try:
        yield sup
    finally:
        sup.stop()


def test_restart_delay_is_none_after_a_good_run_then_doubles_to_a_cap() -> None:
    assert restart_delay_s(0) == 0.0
    for fast_deaths in range(1, 12):
        ceiling = min(RESTART_BACKOFF.max_s, RESTART_BACKOFF.base_s * 2 ** (fast_deaths - 1))
        assert ceiling / 2 <= restart_delay_s(fast_deaths) <= ceiling


def test_a_crash_looping_child_is_restarted_with_a_growing_delay(tmp_path: Path) -> None:
    with supervising(tmp_path, "import sys; sys.exit(3)", stop_timeout_s=5, burst=False) as sup:
        deadline = time.monotonic() + 30
        while len(sup.events("worker process exited; restarting it")) < 3:
            assert sup.proc.poll() is None, sup.text()
            assert time.monotonic() < deadline, sup.text()
            time.sleep(0.05)
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(10) == 0, sup.text()
    exits = sup.events("worker process exited; restarting it")
    assert {e["exit_code"] for e in exits} == {3}
    for attempt, e in enumerate(exits, start=1):
        ceiling = min(RESTART_BACKOFF.max_s, RESTART_BACKOFF.base_s * 2 ** (attempt - 1))
        assert ceiling / 2 - 0.01 <= e["restart_in_s"] <= ceiling + 0.01
    pids = [e["pid"] for e in sup.events("worker process started")]
    assert len(set(pids)) == len(pids) >= 3


def test_sigterm_kills_a_child_that_ignores_it_after_the_stop_timeout(tmp_path: Path) -> None:
    with supervising(tmp_path, IGNORES_SIGTERM, stop_timeout_s=1, burst=False) as sup:
        sup.wait_for("ready")
        signalled = time.monotonic()
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(15) == 0, sup.text()
        took = time.monotonic() - signalled
    assert 1 <= took < 10
    (started,) = sup.events("worker process started")
    (killed,) = sup.events("worker process did not stop in time; killing it")
    (stopped,) = sup.events("worker process stopped")
    assert killed["pid"] == stopped["pid"] == started["pid"]
    assert stopped["exit_code"] == -signal.SIGKILL
    assert not Path(f"/proc/{started['pid']}").exists()


def test_a_burst_child_that_finishes_is_not_restarted(tmp_path: Path) -> None:
    with supervising(tmp_path, "pass", stop_timeout_s=5, burst=True) as sup:
        assert sup.proc.wait(30) == 0, sup.text()
    assert len(sup.events("worker process started")) == 1
    (finished,) = sup.events("worker process finished")
    assert finished["exit_code"] == 0
    assert sup.events("worker process exited; restarting it") == []
