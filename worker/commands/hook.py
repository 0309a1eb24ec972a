"""`memq hook claude-code`: record one Claude Code hook event; never fail or stall the agent.

Runs once per tool call, so `worker.cli` dispatches here before typer and the other
commands are imported, and nothing here imports redis-py. Whatever happens the process
exits 0 within HOOK_BUDGET_S and prints nothing on stdout; problems go to stderr. When Redis
does not answer within MEMQ_HOOK_REDIS_TIMEOUT_MS the event waits in the spool.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pipeline.errors import PipelineError
from pipeline.events import Event
from worker.claude_code import HookPayloadError, decode_payload, events_from_payload
from worker.errors import ConfigError, RedisUnavailableError
from worker.producer import PublishRefusedError, SyncProducer, prepare_event
from worker.project import resolve_project
from worker.settings import Settings, load_settings, read_settings_file
from worker.spool import Spool

if TYPE_CHECKING:
    import typer

HOOK_BUDGET_S = 1.0
# Work (starting the managed Redis, flushing the spool) stops here, leaving time to exit.
_WORK_BUDGET_S = 0.6
# The process started ~50 ms before main_fast runs; the watchdog fires before 1 s overall.
_WATCHDOG_S = 0.85


def register(app: typer.Typer) -> None:
    """Add `memq hook claude-code` (normally reached through main_fast, without typer)."""
    import typer

    group = typer.Typer(name="hook", help="Agent-host hooks: a payload on stdin, always exit 0.")

    @group.command("claude-code")
    def claude_code_command() -> None:
        """Record one Claude Code hook event read on stdin (see the README's settings.json)."""
        run_claude_code_hook(sys.stdin.buffer, os.environ, started=time.monotonic())

    app.add_typer(group)


def main_fast() -> int:
    """The console-script fast path for `memq hook claude-code`."""
    started = time.monotonic()
    watchdog = threading.Timer(_WATCHDOG_S, _give_up)
    watchdog.daemon = True
    watchdog.start()
    code = run_claude_code_hook(sys.stdin.buffer, os.environ, started=started)
    watchdog.cancel()
    return code


def run_claude_code_hook(stdin: BinaryIO, environ: Mapping[str, str], *, started: float) -> int:
    """Read one hook payload, publish its events (or spool them); always returns 0."""
    try:
        _record(stdin.read(), environ, deadline=started + _WORK_BUDGET_S)
    except (HookPayloadError, PipelineError, ConfigError) as e:
        _log(f"nothing recorded: {e}")
    except Exception as e:  # the agent host must never see a failing hook
        _log(f"nothing recorded, unexpected {type(e).__name__}: {e}")
    return 0


def _record(raw: bytes, environ: Mapping[str, str], *, deadline: float) -> None:
    settings = _settings(environ)
    payload = decode_payload(raw)
    project = resolve_project(payload.cwd or os.getcwd(), settings.project)
    events = events_from_payload(
        payload, project=project, host=socket.gethostname(), now=datetime.now(UTC)
    )
    if events:
        _deliver([prepare_event(e, settings) for e in events], settings, deadline)


def _deliver(events: Sequence[Event], settings: Settings, deadline: float) -> None:
    spool = Spool.from_settings(settings)
    try:
        producer = SyncProducer.connect(
            settings,
            timeout_ms=settings.hook_redis_timeout_ms,
            start_timeout_s=max(0.05, deadline - time.monotonic()),
        )
    except (RedisUnavailableError, ConfigError) as e:
        _spool(spool, events, f"Redis unavailable ({e})")
        return
    with producer:
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


def _spool(spool: Spool, events: Sequence[Event], reason: str) -> None:
    kept = spool.append(events)
    if kept:
        _log(f"{reason}: {kept} event(s) spooled in {spool.path}; `memq spool flush` sends them")


def _settings(environ: Mapping[str, str]) -> Settings:
    config = environ.get("MEMQ_CONFIG")
    file_values = read_settings_file(Path(config).expanduser()) if config else None
    return load_settings(environ, file_values)


def _give_up() -> None:
    _log(f"gave up after {HOOK_BUDGET_S:g} s so the agent is not held up; event not recorded")
    sys.stderr.flush()
    os._exit(0)


def _log(message: str) -> None:
    sys.stderr.write(f"memq hook: {' '.join(message.split())}\n")
