"""Logs on structlog: one event per line, the session id on every line (JSON or console)."""

from __future__ import annotations

import json
import logging
import sys
import time
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TextIO

import structlog
from structlog.contextvars import bind_contextvars, bound_contextvars, merge_contextvars
from structlog.stdlib import ProcessorFormatter
from structlog.typing import EventDict, Processor, WrappedLogger

SESSION = "session_id"
# Set by `logging.Formatter.format` (another handler may have run first) or by uvicorn
# (an ANSI-coloured copy of the message): never fields of a line.
_NOT_FIELDS = ("message", "asctime", "color_message")


def session_context(session_id: str) -> AbstractContextManager[None]:
    """Every log line emitted inside (this task and the tasks it starts) carries the session id."""
    return bound_contextvars(**{SESSION: session_id})


def bind_session(session_id: str) -> None:
    """Tag the current context's lines with the session id (an arq job's own task, at its start)."""
    bind_contextvars(**{SESSION: session_id})


def _fields(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Keep stdlib's formatting leftovers out; `session_id` on every line, null when none."""
    for key in _NOT_FIELDS:
        event.pop(key, None)
    event.setdefault(SESSION, None)
    return event


def _json_layout(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """ts, level, logger, event first, then the fields; a traceback goes under `exc`."""
    record = event.pop("_record", None)
    event.pop("_from_structlog", None)
    created = record.created if isinstance(record, logging.LogRecord) else time.time()
    head: EventDict = {
        "ts": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
        "level": event.pop("level", None),
        "logger": event.pop("logger", None),
        "event": event.pop("event", None),
    }
    if "exception" in event:
        event["exc"] = event.pop("exception")
    head.update(event)
    return head


def _console_layout(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """A line without a session leaves the field out rather than printing `session_id=None`."""
    if event.get(SESSION) is None:
        event.pop(SESSION, None)
    return event


def _pre_chain() -> list[Processor]:
    """What every stdlib record (ours, arq's, uvicorn's) goes through before rendering."""
    return [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        merge_contextvars,
        structlog.stdlib.ExtraAdder(),  # a call site's extra={...} fields
        _fields,
    ]


def formatter(log_format: str, stream: TextIO | None = None) -> ProcessorFormatter:
    """The `logging.Formatter` rendering records as JSON lines, or as console lines for people."""
    if log_format == "json":
        renderers: list[Processor] = [
            structlog.processors.format_exc_info,
            _json_layout,
            structlog.processors.JSONRenderer(json.dumps, default=str, ensure_ascii=False),
        ]
    else:
        renderers = [
            ProcessorFormatter.remove_processors_meta,
            structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False, key="timestamp"),
            _console_layout,
            structlog.dev.ConsoleRenderer(
                colors=(stream or sys.stderr).isatty(),
                # rich's pretty tracebacks show local variables: API keys among them
                exception_formatter=structlog.dev.plain_traceback,
            ),
        ]
    return ProcessorFormatter(processors=renderers, foreign_pre_chain=_pre_chain())


def configure_logging(log_format: str, level: int = logging.INFO) -> None:
    """Send every log line to stderr in the chosen format; called only by CLI entry points."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format, sys.stderr))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # One INFO line per HTTP request is noise at thousands of events a second: memq logs
    # one line per turn with the outcome instead (arq's per-job lines stay, for operators).
    for chatty in ("httpx", "httpx2"):
        logging.getLogger(chatty).setLevel(max(level, logging.WARNING))
