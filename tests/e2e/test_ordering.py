"""Per-session order across worker processes: each observer sees its session's calls in order."""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver, RecordedRequest, Reply, deterministic_reply
from tests.support.worker_checks import observations, wait_until
from tests.support.worker_harness import drain, make_settings, publish, running_runtime, tool_call
from tests.support.worker_process import worker_env, worker_processes
from worker.settings import Settings

SESSIONS = 20
EVENTS_PER_SESSION = 30
_SESSION_ID = re.compile(r"<memory_session_id>([^<]+)</memory_session_id>")
_CALL = re.compile(
    r"<observed_from_primary_session>.*?<what_happened>([^<]*)</what_happened>"
    r".*?<parameters>(.*?)</parameters>.*?</observed_from_primary_session>",
    re.S,
)
_STEP = re.compile(r"step (\d+) of ([\w-]+)")


def calls_seen(request: RecordedRequest) -> tuple[str, list[int]]:
    """The session a request belongs to and the step numbers of its tool calls, in order."""
    match = _SESSION_ID.search(request.system)
    assert match is not None, "every system prompt names its memory session"
    session = match[1]
    steps = []
    for tool, parameters in _CALL.findall(request.user):
        assert tool == "Bash"
        step = _STEP.search(parameters)
        assert step is not None, parameters
        assert step[2] == session, parameters
        steps.append(int(step[1]))
    return session, steps


@pytest.mark.slow
async def test_each_session_reaches_its_observer_in_publish_order_across_two_processes(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    small = {"batch_max_events": "3", "concurrency": "4"}
    settings = make_settings(tmp_path, redis_url, fake_observer.url, **small)
    env = worker_env(tmp_path, redis_url, fake_observer, job_timeout_s="30", **small)
    sessions = [f"order-{i:02d}" for i in range(SESSIONS)]
    total = SESSIONS * EVENTS_PER_SESSION
    with worker_processes(env, tmp_path, 2) as workers:
        for w in workers:
            w.wait_for_log("redis_version")
        # Interleaved across sessions, published while both workers already consume.
        for n in range(EVENTS_PER_SESSION):
            for s in sessions:
                await publish(arq_redis, settings, tool_call(
                    s, n, tool_input={"command": f"echo step {n} of {s}"},
                ))  # fmt: skip
        started = time.monotonic()
        await wait_until(
            lambda: _count_is(settings, total), timeout_s=90, what=f"{total} stored rows"
        )
        elapsed = time.monotonic() - started
        logs = [w.log() for w in workers]
    seen: dict[str, list[int]] = defaultdict(list)
    for request in fake_observer.requests:
        session, steps = calls_seen(request)
        seen[session] += steps
    for s in sessions:
        assert seen[s] == list(range(EVENTS_PER_SESSION)), s
    rows = await observations(settings)
    assert len(rows) == total
    by_session: dict[str, set[str | None]] = defaultdict(set)
    for row in rows:
        by_session[row.memory_session_id].add(row.title)
    assert {s: len(t) for s, t in by_session.items()} == dict.fromkeys(sessions, 30)
    # Both processes did part of the work (the fleet really shared it).
    assert all("turn stored" in log for log in logs)
    assert elapsed < 60


async def _count_is(settings: Settings, total: int) -> bool:
    return len(await observations(settings)) >= total


async def test_order_holds_when_turns_fail_and_are_retried(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, batch_max_events="3")
    failed: list[RecordedRequest] = []
    lock = threading.Lock()

    def flaky(request: RecordedRequest) -> Reply:
        with lock:  # every third request fails: the turn is retried, later calls wait
            if len(fake_observer.requests) % 3 == 0:
                failed.append(request)
                return Reply(status=503, error_message="overloaded")
        return deterministic_reply(request)

    fake_observer.responder = flaky
    sessions = ["r1", "r2", "r3"]
    for n in range(12):
        for s in sessions:
            await publish(arq_redis, settings, tool_call(
                s, n, tool_input={"command": f"echo step {n} of {s}"},
            ))  # fmt: skip
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    assert failed
    answered: dict[str, list[int]] = defaultdict(list)
    failed_ids = {id(r) for r in failed}
    for request in fake_observer.requests:
        if id(request) not in failed_ids:
            session, steps = calls_seen(request)
            answered[session] += steps
    assert answered == {s: list(range(12)) for s in sessions}
    assert len(await observations(settings)) == 36
