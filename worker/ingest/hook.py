"""`memq hook <agent>`: record one agent hook event; never fail or stall the agent.

Runs once per tool call, so `worker.cli.app` dispatches here before typer and the other
commands are imported, and nothing here imports redis-py. Whatever happens the process
exits 0 within HOOK_BUDGET_S (START_BUDGET_S on SessionStart, which reads the store) and
prints nothing on stdout except, on SessionStart, the project's context for the agent to
inject; problems go to stderr. When Redis
does not answer within MEMQ_HOOK_REDIS_TIMEOUT_MS the event waits in the spool.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pipeline.errors import PipelineError
from worker.errors import ConfigError, RedisUnavailableError
from worker.ingest.agents import AGENTS
from worker.ingest.agents.payload import HookPayloadError
from worker.ingest.hook_input import HookInput, prepare_all, read_hook_input
from worker.ingest.prepare import PreparedEvent
from worker.ingest.producer import PublishRefusedError, SyncProducer
from worker.ingest.spool import Spool
from worker.private_files import tighten_data_dir
from worker.settings import Settings, settings_from_environment

if TYPE_CHECKING:
    import typer

HOOK_BUDGET_S = 1.0
# Both counted from the process's start. Work (starting the managed Redis, flushing the
# spool) stops at the first; the watchdog spools what is in flight and exits at the second.
_WORK_BUDGET_S = 0.65
_WATCHDOG_S = 0.9
# SessionStart reads the store for the context: once per session, and worth the wait on a
# loaded machine (the agents' hook timeouts in the docs are 3 s and more).
START_BUDGET_S = 2.5
_START_WORK_BUDGET_S = 2.0
# On a machine so loaded that importing took the whole budget, still try briefly.
_MIN_WATCHDOG_S = 0.2


def register(app: typer.Typer) -> None:
    """Add `memq hook <agent>` per agent (normally reached through main_fast, without typer)."""
    import typer

    group = typer.Typer(name="hook", help="Agent-host hooks: a payload on stdin, always exit 0.")
    for agent in AGENTS:
        group.command(agent, help=f"Record one {agent} hook event read on stdin.")(_command(agent))
    app.add_typer(group)


def _command(agent: str) -> Callable[[], None]:
    def command() -> None:
        run_hook(agent, sys.stdin.buffer, os.environ, started=time.monotonic())

    return command


class InFlight:
    """Events prepared but not yet published or spooled: the watchdog spools them on timeout."""

    __slots__ = ("events", "spool", "watchdog")

    def __init__(self) -> None:
        self.events: Sequence[PreparedEvent] = ()
        self.spool: Spool | None = None
        self.watchdog: Watchdog | None = None


class Watchdog:
    """Spools what is in flight and exits the process at a moment that can be moved later."""

    def __init__(self, in_flight: InFlight) -> None:
        self._in_flight = in_flight
        self._timer: threading.Timer | None = None

    def fire_at(self, moment: float) -> None:
        """(Re)arm for `moment` (time.monotonic()), at least _MIN_WATCHDOG_S from now."""
        self.cancel()
        delay = max(_MIN_WATCHDOG_S, moment - time.monotonic())
        self._timer = threading.Timer(delay, _give_up, args=(self._in_flight,))
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        """Disarm."""
        if self._timer is not None:
            self._timer.cancel()


def main_fast(agent: str, raw: bytes) -> int:
    """The console-script fast path for `memq hook <agent>` (stdin already read: `raw`)."""
    started = time.monotonic() - _process_age_s()
    in_flight = InFlight()
    in_flight.watchdog = watchdog = Watchdog(in_flight)
    watchdog.fire_at(started + _WATCHDOG_S)
    code = run_hook(agent, io.BytesIO(raw), os.environ, started=started, in_flight=in_flight)
    watchdog.cancel()
    return code


def run_hook(
    agent: str,
    stdin: BinaryIO,
    environ: Mapping[str, str],
    *,
    started: float,
    in_flight: InFlight | None = None,
) -> int:
    """Read one hook payload, publish its events (or spool them); always returns 0."""
    try:
        _publish(agent, stdin.read(), environ, started + _WORK_BUDGET_S, in_flight or InFlight())
    except (HookPayloadError, PipelineError, ConfigError) as e:
        _log(f"nothing published or spooled: {e}")
    except Exception as e:  # the agent host must never see a failing hook
        _log(f"nothing published or spooled, unexpected {type(e).__name__}: {e}")
    return 0


def _publish(
    agent: str, raw: bytes, environ: Mapping[str, str], deadline: float, in_flight: InFlight
) -> None:
    settings = settings_from_environment(environ)
    tighten_data_dir(settings.data_path)
    hook_input = read_hook_input(raw, settings, agent=agent, default_cwd=os.getcwd())
    if hook_input.session_start:
        from worker.search.context import session_start_output

        deadline += _START_WORK_BUDGET_S - _WORK_BUDGET_S
        if in_flight.watchdog is not None:
            in_flight.watchdog.fire_at(deadline + START_BUDGET_S - _START_WORK_BUDGET_S)
        # The one output on stdout: the agent injects it as the new session's context.
        cwd = hook_input.cwd or None
        out = session_start_output(settings, hook_input.project, deadline - time.monotonic(), cwd)
        sys.stdout.write(out)
    if hook_input.events or hook_input.resend:
        spool = in_flight.spool = Spool.from_settings(settings)
        in_flight.events = hook_input.events
        _deliver(hook_input, settings, deadline, spool, in_flight)
        in_flight.events = ()


def _deliver(
    hook_input: HookInput, settings: Settings, deadline: float, spool: Spool, in_flight: InFlight
) -> None:
    events = hook_input.events
    try:
        producer = SyncProducer.connect(
            settings,
            timeout_ms=settings.hook_redis_timeout_ms,
            start_timeout_s=max(0.05, deadline - time.monotonic()),
        )
    except (RedisUnavailableError, ConfigError) as e:
        # Which re-sends are new cannot be asked: spool them all (the flush keeps one each).
        _spool(spool, prepare_all(hook_input.resend, settings) + events, f"Redis unavailable ({e})")
        return
    with producer:
        if hook_input.resend:
            # Only the calls no hook delivered are prepared (redacted, hashed): one round trip.
            fresh = producer.unseen(hook_input.resend)
            events = in_flight.events = prepare_all(fresh, settings) + events
        if spool.pending():
            # Older events wait in the spool: queue behind them so the order holds.
            try:
                outcome = spool.append_then_flush(events, producer, deadline=deadline)
            except RedisUnavailableError as e:
                _log(f"spool flush interrupted ({e}); the events stay spooled in {spool.path}")
                return
            if outcome is not None and outcome.refused:
                _log(f"{outcome.refused}; {outcome.remaining} events stay spooled")
            return
        try:
            producer.publish_many(events)
        except PublishRefusedError as e:
            refused = [ev for ev, r in zip(events, e.results, strict=True) if r.status == "refused"]
            _spool(spool, refused, str(e))
        except RedisUnavailableError as e:
            _spool(spool, events, f"publish failed ({e})")


def _spool(spool: Spool, events: Sequence[PreparedEvent], reason: str) -> None:
    kept = spool.append(events)
    if kept:
        _log(f"{reason}: {kept} event(s) spooled in {spool.path}; `memq spool flush` sends them")


def _process_age_s() -> float:
    """Seconds since this process started (interpreter start and imports included)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime_s - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.1  # no /proc: a typical start-up time


def _give_up(in_flight: InFlight) -> None:
    # Spooling an event the main thread was still publishing is harmless: the flush
    # deduplicates by event id. A spool locked by the main thread is not waited for.
    spool, events = in_flight.spool, in_flight.events
    outcome = "nothing published or spooled"
    if spool is not None and events and spool.try_append(events):
        outcome = f"{len(events)} event(s) spooled in {spool.path}"
    _log(f"gave up within its time budget so the agent is not held up; {outcome}")
    sys.stderr.flush()
    os._exit(0)


def _log(message: str) -> None:
    sys.stderr.write(f"memq hook: {' '.join(message.split())}\n")
