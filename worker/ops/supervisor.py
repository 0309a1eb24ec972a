"""Pre-forked worker processes: restart a child that dies, stop every child on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from types import FrameType

from worker.backoff import Backoff

log = logging.getLogger(__name__)

STABLE_S = 30.0
"""A child that ran this long had a good run: if it dies, it is restarted at once."""
RESTART_BACKOFF = Backoff(base_s=0.5, max_s=30.0)
"""A child that keeps dying within STABLE_S of its start waits 0.5 s doubling to 30 s."""
_POLL_S = 0.1
ORPHAN_CHECK_S = 1.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def restart_delay_s(fast_deaths: int) -> float:
    """Seconds before restarting a child that died after `fast_deaths` short runs in a row."""
    if fast_deaths == 0:
        return 0.0
    return RESTART_BACKOFF.delay_s(fast_deaths)


@dataclass(slots=True)
class _Child:
    """One slot of the pool: the command it runs and the process running it now, if any."""

    index: int
    command: list[str]
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    fast_deaths: int = 0
    restart_at: float = 0.0
    done: bool = False  # exited 0 where that is the end of its work (a burst run)

    def fields(self) -> dict[str, object]:
        """The log fields naming this child."""
        return {"child": self.index, "pid": self.proc.pid if self.proc else None}


class Supervisor:
    """Runs one process per command, restarting any that exits unasked, until told to stop;
    with `done_on_success` (`--burst`) a child exiting 0 has finished and is not restarted."""

    def __init__(
        self, commands: list[list[str]], *, stop_timeout_s: float, done_on_success: bool
    ) -> None:
        self._children = [_Child(i, command) for i, command in enumerate(commands)]
        self._stop_timeout_s = stop_timeout_s
        self._done_on_success = done_on_success
        self._stop_signal: str | None = None

    def run(self) -> None:
        """Start every child, restart the ones that die, and stop them all on SIGTERM/SIGINT
        (or when every burst child finished); returns once no child is left running."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _STOP_SIGNALS}
        try:
            while self._stop_signal is None and not all(c.done for c in self._children):
                now = time.monotonic()
                for child in self._children:
                    self._tend(child, now)
                time.sleep(_POLL_S)
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, _: FrameType | None) -> None:
        # Only a flag: the handler interrupts this thread anywhere, even inside a log call.
        self._stop_signal = self._stop_signal or signal.Signals(signum).name

    def _tend(self, child: _Child, now: float) -> None:
        """Notice a child's exit (and schedule its restart); start it when its time has come."""
        if child.proc is not None:
            code = child.proc.poll()
            if code is None:
                return
            if code == 0 and self._done_on_success:
                child.done = True
                log.info("worker process finished", extra={**child.fields(), "exit_code": 0})
                child.proc = None
                return
            quick = now - child.started_at < STABLE_S
            child.fast_deaths = child.fast_deaths + 1 if quick else 0
            delay = restart_delay_s(child.fast_deaths)
            child.restart_at = now + delay
            extra = {**child.fields(), "exit_code": code, "restart_in_s": round(delay, 2)}
            log.warning("worker process exited; restarting it", extra=extra)
            child.proc = None
        if not child.done and now >= child.restart_at and self._stop_signal is None:
            self._start(child)

    def _start(self, child: _Child) -> None:
        # Its own process group: a terminal's Ctrl-C reaches the supervisor only, which
        # then sends each child exactly one SIGTERM.
        child.proc = subprocess.Popen(child.command, stdin=subprocess.DEVNULL, process_group=0)
        child.started_at = time.monotonic()
        log.info("worker process started", extra=child.fields())

    def _stop_all(self) -> None:
        """SIGTERM every running child, wait for them (bounded), SIGKILL the ones that linger."""
        if self._stop_signal is not None:
            log.info("stopping worker processes", extra={"signal": self._stop_signal})
        for child in self._children:
            if child.proc is not None:
                child.proc.send_signal(signal.SIGTERM)  # a no-op for one that already exited
        deadline = time.monotonic() + self._stop_timeout_s
        for child in self._children:
            if child.proc is None:
                continue
            try:
                code = child.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error(
                    "worker process did not stop in time; killing it",
                    extra={**child.fields(), "waited_s": self._stop_timeout_s},
                )
                child.proc.kill()
                code = child.proc.wait()
            log.info("worker process stopped", extra={**child.fields(), "exit_code": code})
            child.proc = None


async def stop_when_orphaned(supervisor_pid: int) -> None:
    """In a child: SIGTERM itself (a graceful stop) once its supervisor is gone, e.g. killed
    with -9, rather than run on unsupervised."""
    # Polled: nothing portable notifies a child that its parent died (it is re-parented).
    while os.getppid() == supervisor_pid:  # noqa: ASYNC110
        await asyncio.sleep(ORPHAN_CHECK_S)
    log.warning("supervisor gone; stopping", extra={"supervisor_pid": supervisor_pid})
    os.kill(os.getpid(), signal.SIGTERM)
