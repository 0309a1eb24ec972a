"""Structured log lines: the session id on every line, arq's own job lines included."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from worker.logs import JsonFormatter, SessionFilter, session_context


@pytest.fixture(name="lines")
def _fix_lines() -> Iterator[tuple[io.StringIO, logging.Logger, logging.Logger]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(SessionFilter())
    loggers = logging.getLogger("arq.worker"), logging.getLogger("worker.observe.session_run")
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield out, *loggers
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def _records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("session", ["s1", "team:repo:42", "a b"])
def test_arq_job_lines_carry_the_session_of_their_job_id(
    lines: tuple[io.StringIO, logging.Logger, logging.Logger], session: str
) -> None:
    out, arq_log, _ = lines
    # arq's own wording for a job's start and end.
    arq_log.info("%6.2fs → %s(%s)%s", 0.04, f"memq:observe:{session}:3:observe_session",
                 repr(session), "")  # fmt: skip
    arq_log.info("%6.2fs ← %s ● %s", 0.02, f"memq:observe:{session}:3:observe_session", "'ok'")
    arq_log.info("%6.2fs → %s()", 0.05, "memq:cron:sweep")
    got = [r["session_id"] for r in _records(out)]
    assert got == [session, session, None]


def test_the_context_session_wins_and_explicit_extra_wins_over_both(
    lines: tuple[io.StringIO, logging.Logger, logging.Logger],
) -> None:
    out, arq_log, ours = lines
    with session_context("ctx"):
        ours.info("turn stored")
        ours.info("turn stored", extra={"session_id": "explicit"})
        arq_log.info("%s", "memq:observe:other:1:observe_session()")
    assert [r["session_id"] for r in _records(out)] == ["ctx", "explicit", "ctx"]
