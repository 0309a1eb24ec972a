"""Fairness: one busy session cannot starve the rest (the original starved 86 on 2 slots)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver
from tests.support.worker_checks import observations
from tests.support.worker_harness import drain, make_settings, publish, running_runtime, tool_call

BIG_EVENTS = 200
SMALL_SESSIONS = 20
_SESSION_ID = re.compile(r"<memory_session_id>([^<]+)</memory_session_id>")
_CALL = "<observed_from_primary_session>"


@pytest.mark.parametrize("turns_per_job", ["4", "2"])
async def test_small_sessions_finish_before_a_busy_one_is_half_done_on_two_slots(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    turns_per_job: str,
) -> None:
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, concurrency="2", turns_per_job=turns_per_job
    )
    # The busy session is published first: its job is at the head of the queue.
    await publish(arq_redis, settings, *[tool_call("big", n) for n in range(BIG_EVENTS)])
    small = [f"small-{i:02d}" for i in range(SMALL_SESSIONS)]
    for session in small:
        await publish(arq_redis, settings, tool_call(session, 1), tool_call(session, 2))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    # Walk the observer's requests in arrival order, counting the busy session's calls.
    big_seen = 0
    big_seen_when_small_done = None
    small_left = set(small)
    for request in fake_observer.requests:
        match = _SESSION_ID.search(request.system)
        assert match is not None
        session = match[1]
        if session == "big":
            big_seen += request.user.count(_CALL)
        else:
            small_left.discard(session)
            if not small_left and big_seen_when_small_done is None:
                big_seen_when_small_done = big_seen
    assert big_seen == BIG_EVENTS
    assert big_seen_when_small_done is not None
    assert big_seen_when_small_done < BIG_EVENTS / 2
    assert len(await observations(settings)) == BIG_EVENTS + 2 * SMALL_SESSIONS
