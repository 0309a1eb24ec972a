"""Structured log lines: the session id on every line, arq's own job lines included."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver
from tests.support.worker_harness import drain, make_settings, publish, running_runtime, tool_call
from worker.keys import Keys
from worker.logs import formatter, session_context

Lines = tuple[io.StringIO, logging.Logger]


def _capture(log_format: str) -> Iterator[Lines]:
    """Every record at INFO and up, from any logger, rendered into a string buffer."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter(log_format, out))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield out, logging.getLogger("worker.sessions.session_run")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture(name="json_lines")
def _fix_json_lines() -> Iterator[Lines]:
    yield from _capture("json")


@pytest.fixture(name="console_lines")
def _fix_console_lines() -> Iterator[Lines]:
    yield from _capture("console")


def _records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_json_line_holds_time_level_logger_event_fields_and_a_null_session(
    json_lines: Lines,
) -> None:
    out, ours = json_lines
    ours.warning("turn %s", "stored", extra={"outcome": "stored", "stored": 2})
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert list(record)[:4] == ["ts", "level", "logger", "event"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", str(record["ts"]))
    assert {k: v for k, v in record.items() if k != "ts"} == {
        "level": "warning",
        "logger": "worker.sessions.session_run",
        "event": "turn stored",
        "outcome": "stored",
        "stored": 2,
        "session_id": None,
    }


def test_lines_inside_a_session_context_carry_it_and_lines_after_do_not(json_lines: Lines) -> None:
    out, ours = json_lines
    arq_log = logging.getLogger("arq.worker")
    with session_context("team:repo:42"):
        ours.info("turn stored")
        arq_log.info("%6.2fs ← %s ● %s", 0.02, "memq:observe:other:1:observe_session", "")
    ours.info("after")
    assert [r["session_id"] for r in _records(out)] == ["team:repo:42", "team:repo:42", None]


def test_an_exception_renders_its_traceback_under_exc_on_one_json_line(json_lines: Lines) -> None:
    out, ours = json_lines
    with session_context("s1"):
        try:
            raise ValueError("bad entry")
        except ValueError:
            ours.exception("session job failed")
    (record,) = _records(out)
    assert record["level"] == "error"
    assert record["session_id"] == "s1"
    assert "ValueError: bad entry" in str(record["exc"])


def test_uvicorns_coloured_copy_of_a_message_is_no_field(json_lines: Lines) -> None:
    out, _ = json_lines
    logging.getLogger("uvicorn.error").info(
        "Started server process [%d]", 7, extra={"color_message": "\x1b[36m%d\x1b[0m"}
    )
    (record,) = _records(out)
    assert record["event"] == "Started server process [7]"
    assert "color_message" not in record


def test_a_console_line_shows_time_level_event_logger_and_fields_without_colours(
    console_lines: Lines,
) -> None:
    out, ours = console_lines
    ours.info("no session here")
    with session_context("s1"):
        ours.warning("lease lost", extra={"attempt": 2})
        try:
            raise ValueError("bad entry")
        except ValueError:
            ours.exception("session job failed")
    first, second, third, *traceback = out.getvalue().splitlines()
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d \[info\s*\] no session here\s+\[worker\.sessions\.session_run\]", first
    )
    assert "session_id" not in first
    warning = r"\d\d:\d\d:\d\d \[warning\s*\] lease lost\s+\[\S+\] attempt=2 session_id=s1"
    assert re.fullmatch(warning, second)
    assert "session job failed" in third
    assert traceback[0] == "Traceback (most recent call last):"  # plain: no locals, no boxes
    assert traceback[-1] == "ValueError: bad entry"
    assert "\x1b[" not in out.getvalue()


@pytest.mark.parametrize(
    ("job_id", "session"),
    [
        ("memq:observe:s1:3", "s1"),
        ("memq:observe:team:repo:42:17", "team:repo:42"),
        ("memq:observe:a b:1", "a b"),
        ("cron:memq:cron:sweep:1764590000000", None),
        ("other:observe:s1:3", None),
        ("memq:observe:s1:x", None),
    ],
)
def test_a_job_id_names_its_session(job_id: str, session: str | None) -> None:
    assert Keys("memq").session_of_job(job_id) == session


@pytest.mark.parametrize("session", ["s1", "team:repo:42"])
async def test_arqs_job_start_and_end_lines_and_the_jobs_own_lines_carry_the_session(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    json_lines: Lines,
    session: str,
) -> None:
    out, _ = json_lines
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await publish(arq_redis, settings, tool_call(session, 1), tool_call(session, 2))
    await publish(arq_redis, settings, tool_call("other", 1))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    records = _records(out)
    arq_lines = [
        r for r in records if r["logger"] == "arq.worker" and ":observe:" in str(r["event"])
    ]
    starts = {r["session_id"] for r in arq_lines if "→" in str(r["event"])}
    ends = {r["session_id"] for r in arq_lines if "←" in str(r["event"])}
    assert starts == ends == {session, "other"}
    for line in arq_lines:  # each line names its own job's session, never another's
        assert f":observe:{line['session_id']}:" in str(line["event"])
    turns = [r for r in records if str(r["event"]).startswith("turn ")]
    assert sorted(str(r["session_id"]) for r in turns) == sorted([session, "other"])
    # arq's lines outside any job (startup, the burst's summary) name no session.
    assert all(r["session_id"] is None for r in records if "Starting worker" in str(r["event"]))
