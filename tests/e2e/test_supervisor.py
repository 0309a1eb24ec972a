"""`memq worker --processes 2`: two children at work, a kill -9 replaced, SIGTERM stops them all."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from arq.connections import ArqRedis
from redis.exceptions import ResponseError

from tests.support.fake_observer import FakeObserver
from tests.support.worker_checks import observations, unacked, wait_until
from tests.support.worker_harness import make_settings, publish, tool_call
from tests.support.worker_process import WorkerProcess, worker_env
from worker.keys import CONSUMER_GROUP, Keys
from worker.settings import Settings

JOB_TIMEOUT_S = 6
SMALL = {"job_timeout_s": str(JOB_TIMEOUT_S)}


def _log_events(worker: WorkerProcess, event: str) -> list[dict[str, Any]]:
    """The supervisor's JSON log lines named `event` (children write to the same log)."""
    found = []
    for line in worker.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == event:
                found.append(record)
    return found


def _current_pids(worker: WorkerProcess) -> dict[int, int]:
    """Child index -> pid of its latest start."""
    return {r["child"]: r["pid"] for r in _log_events(worker, "worker process started")}


def _pids_when(
    worker: WorkerProcess, ready: Callable[[dict[int, int]], bool]
) -> dict[int, int] | None:
    pids = _current_pids(worker)
    return pids if ready(pids) else None


async def _readers(redis: ArqRedis, settings: Settings, sessions: list[str]) -> set[int]:
    """Pids of the worker processes holding read, unacked events of the sessions (a consumer
    is named host-pid-suffix)."""
    pids: set[int] = set()
    for session in sessions:
        key = Keys(settings.prefix).events(session)
        if not await redis.exists(key):
            continue
        with contextlib.suppress(ResponseError):  # no group yet: nobody read the stream
            consumers: Any = await redis.xinfo_consumers(key, CONSUMER_GROUP)
            pids |= {int(c["name"].decode().rsplit("-", 2)[1]) for c in consumers
                     if int(c["pending"]) > 0}  # fmt: skip
    return pids


async def _wait_for_readers(
    redis: ArqRedis, settings: Settings, sessions: list[str], pids: set[int]
) -> None:
    async def all_read() -> bool:
        return pids <= await _readers(redis, settings, sessions)

    await wait_until(all_read, timeout_s=60, what=f"processes {pids} reading events")


def _running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _kill_leftovers(pids: Iterable[int]) -> None:
    """Only a failed test leaves a worker process behind: kill it, if it is still ours."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"worker.cli" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)


async def _stored(settings: Settings, total: int) -> bool:
    return len(await observations(settings)) >= total


@pytest.mark.slow
async def test_two_processes_work_a_killed_one_is_replaced_and_sigterm_stops_all(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, **SMALL)
    env = worker_env(tmp_path, redis_url, fake_observer, **SMALL)
    # The workers run in the data dir: a package named like ours there must not shadow memq.
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / "__init__.py").write_text("raise SystemExit('shadowed')\n")
    parent = WorkerProcess(env, tmp_path / "worker.log", "--processes", "2", "--concurrency", "1")
    try:
        first = await wait_until(
            lambda: _pids_when(parent, lambda p: len(p) == 2),
            timeout_s=30,
            what="two worker processes started",
        )
        assert parent.pid not in first.values()
        assert len(set(first.values())) == 2
        # One session at a time each, replies held: both processes hold a session's events.
        fake_observer.hold()
        await publish(arq_redis, settings, tool_call("a", 1), tool_call("b", 1))
        await _wait_for_readers(arq_redis, settings, ["a", "b"], set(first.values()))
        fake_observer.release()
        await wait_until(lambda: _stored(settings, 2), timeout_s=30, what="both stored")

        os.kill(first[0], signal.SIGKILL)
        replaced = await wait_until(
            lambda: _pids_when(parent, lambda p: p[0] != first[0]),
            timeout_s=30,
            what="the killed worker process replaced",
        )
        assert replaced[0] not in first.values()
        assert replaced[1] == first[1]
        (exited,) = _log_events(parent, "worker process exited; restarting it")
        assert (exited["pid"], exited["exit_code"]) == (first[0], -signal.SIGKILL)

        # The replacement works beside the survivor.
        fake_observer.hold()
        sessions = ["a", "b", "c", "d"]
        await publish(arq_redis, settings, *[tool_call(s, n) for s in sessions
                                             for n in range(2, 5)])  # fmt: skip
        await _wait_for_readers(arq_redis, settings, sessions, set(replaced.values()))
        fake_observer.release()
        await wait_until(
            lambda: _stored(settings, 2 + 12),
            timeout_s=JOB_TIMEOUT_S + 40,
            what="every event published after the kill stored",
        )
        parent.signal(signal.SIGTERM)
        code = await asyncio.to_thread(parent.wait, JOB_TIMEOUT_S + 25)
        stopped = {r["pid"]: r["exit_code"] for r in _log_events(parent, "worker process stopped")}
        log = parent.log()
    finally:
        fake_observer.release()
        parent.stop()
        _kill_leftovers(_current_pids(parent).values())
    assert code == 0, log
    children = {*first.values(), *replaced.values()}
    assert not [pid for pid in children if _running(pid)]
    assert stopped == {pid: 0 for pid in replaced.values()}
    rows = await observations(settings)
    assert len(rows) == 14
    assert max(Counter((r.memory_session_id, r.title) for r in rows).values()) == 1
    for session in sessions:
        assert await unacked(arq_redis, settings, session) == (0, 0)


@pytest.mark.slow
async def test_worker_processes_stop_themselves_when_the_supervisor_is_killed(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver
) -> None:
    env = worker_env(tmp_path, redis_url, fake_observer, **SMALL)
    parent = WorkerProcess(env, tmp_path / "worker.log", "--processes", "2")
    pids: dict[int, int] = {}
    try:
        pids = await wait_until(
            lambda: _pids_when(parent, lambda p: len(p) == 2), timeout_s=30, what="two started"
        )
        await wait_until(
            lambda: parent.log().count("Starting worker for") == 2, timeout_s=60, what="running"
        )
        parent.signal(signal.SIGKILL)
        assert parent.wait(10) == -signal.SIGKILL
        await wait_until(
            lambda: not any(_running(pid) for pid in pids.values()),
            timeout_s=JOB_TIMEOUT_S + 30,
            what="both worker processes gone",
        )
        gone = _log_events(parent, "supervisor gone; stopping")
    finally:
        parent.stop()
        _kill_leftovers(pids.values())
    assert sorted(r["supervisor_pid"] for r in gone) == [parent.pid, parent.pid]
