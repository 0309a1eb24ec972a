"""Structured logs: one event per line, the session id on every line (JSON or console)."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("memq_session", default=None)
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
# arq logs each job's start and end outside the job's context; its job id names the session
# (`<prefix>:observe:<session>:<n>`, then the function). Greedy: a session may hold colons.
_ARQ_JOB_LINE = re.compile(r":observe:(?P<session>.+):\d+:observe_session\b")


@contextmanager
def session_context(session_id: str) -> Iterator[None]:
    """Every log record emitted inside carries this session id."""
    token = _session.set(session_id)
    try:
        yield
    finally:
        _session.reset(token)


class SessionFilter(logging.Filter):
    """Adds `session_id` from the context (or an arq job line's job id) unless one was passed."""

    def filter(self, record: logging.LogRecord) -> bool:
        session = getattr(record, "session_id", None) or _session.get()
        if session is None and record.name == "arq.worker":
            found = _ARQ_JOB_LINE.search(record.getMessage())
            session = found["session"] if found else None
        record.session_id = session
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, event, then every extra field."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        data.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


class ConsoleFormatter(logging.Formatter):
    """Human-readable: time level event key=value… (session first)."""

    def format(self, record: logging.LogRecord) -> str:
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        session = extras.pop("session_id", None)
        parts = [f"{datetime.fromtimestamp(record.created):%H:%M:%S}", record.levelname.lower()]
        if session:
            parts.append(f"[{session}]")
        parts.append(record.getMessage())
        parts += [f"{k}={v}" for k, v in extras.items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(log_format: str, level: int = logging.INFO) -> None:
    """Send every log line to stderr in the chosen format; called only by CLI entry points."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else ConsoleFormatter())
    handler.addFilter(SessionFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # One INFO line per HTTP request is noise at thousands of events a second: memq logs
    # one line per turn with the outcome instead (arq's per-job lines stay, for operators).
    for chatty in ("httpx", "httpx2"):
        logging.getLogger(chatty).setLevel(max(level, logging.WARNING))
