"""`memq agent` while Redis is away: answers at once, spools, flushes in order exactly once."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import decode_event
from tests.support.hook_agent import (
    KINDS,
    SESSION,
    agent_settings,
    eventually,
    has_events,
    payload,
    running_agent,
    stream,
)
from tests.support.ingest import black_hole, closed_port_url
from tests.support.redis_server import RedisServer
from worker.ingest.agent import HOOK_PATH
from worker.ingest.agent_publisher import AgentPublisher
from worker.ingest.prepare import prepare
from worker.ingest.spool import Spool

pytestmark = pytest.mark.slow  # runs uvicorn and redis-server processes


async def test_redis_down_answers_at_once_spools_and_flushes_exactly_once_when_back(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "redis").start()
    try:
        async with running_agent(agent_settings(tmp_path / "data", server.url)) as client:
            server.stop()
            for name, _ in KINDS:
                started = time.monotonic()
                answer = await client.post(HOOK_PATH, content=payload(name))
                assert answer.status_code == 200
                assert time.monotonic() - started < 0.1
            spool = Spool(tmp_path / "data" / "spool", 1 << 30)

            async def spooled() -> bool:
                # Stop re-sends the turn's Bash call, read back from the transcript.
                return spool.status().events == len(KINDS) + 1

            await eventually(spooled)
            spooled_ids = list(
                dict.fromkeys(
                    decode_event(line).event_id for line in spool.path.read_bytes().splitlines()
                )
            )
            server.start()
            redis = aioredis.Redis.from_url(server.url)
            try:
                await eventually(has_events(redis, len(KINDS)))
                await eventually(lambda: _spool_empty(spool))
                # Published after the spooled events, not before them.
                answer = await client.post(HOOK_PATH, content=payload("stop.json"))
                assert answer.status_code == 200
                await eventually(has_events(redis, len(KINDS) + 1))
                await asyncio.sleep(1.0)  # time for a second flush, which must add nothing
                published = await stream(redis)
                assert [e.event_id for e in published[: len(KINDS)]] == spooled_ids
                kinds = [type(e).__struct_config__.tag for e in published]
                assert kinds == [kind for _, kind in KINDS] + ["summarize"]
            finally:
                await redis.aclose()
    finally:
        server.stop()


async def test_a_redis_that_never_was_costs_no_time_and_spools(tmp_path: Path) -> None:
    async with running_agent(agent_settings(tmp_path, closed_port_url())) as client:
        started = time.monotonic()
        answer = await client.post(HOOK_PATH, content=payload("post_tool_use.json"))
        assert (answer.status_code, time.monotonic() - started < 0.1) == (200, True)
        spool = Spool(tmp_path / "spool", 1 << 30)

        async def spooled() -> bool:
            return spool.status().events == 1

        await eventually(spooled)


async def test_a_redis_that_never_answers_costs_no_time_and_spools(tmp_path: Path) -> None:
    with black_hole() as url:
        async with running_agent(agent_settings(tmp_path, url)) as client:
            for name, _ in KINDS:
                started = time.monotonic()
                answer = await client.post(HOOK_PATH, content=payload(name))
                assert (answer.status_code, time.monotonic() - started < 0.1) == (200, True)
            spool = Spool(tmp_path / "spool", 1 << 30)

            async def spooled() -> bool:
                return spool.status().events == len(KINDS) + 1  # Stop re-sends the Bash call

            await eventually(spooled, timeout_s=15)


async def test_past_the_queue_bound_requests_spool_instead_of_waiting(tmp_path: Path) -> None:
    publisher = AgentPublisher(agent_settings(tmp_path, closed_port_url()), queue_batches=1)
    events = [prepare(decode_event(_event_line(n)), 16_384) for n in range(2)]
    await publisher.submit(events[:1])  # queued: the publishing task is not running
    await publisher.submit(events[1:])  # the queue is full: spooled at once
    spooled = Spool(tmp_path / "spool", 1 << 30).status().events
    assert spooled == 1
    registry = publisher.metrics.registry  # what /metrics shows
    sample = registry.get_sample_value("memq_agent_spooled_events_total", {"reason": "queue_full"})
    assert sample == 1


async def _spool_empty(spool: Spool) -> bool:
    return not spool.pending()


def _event_line(n: int) -> bytes:
    return json.dumps({
        "kind": "end", "event_id": f"e{n}", "memory_session_id": SESSION, "project": "shop",
        "occurred_at": "2026-11-30T09:00:00Z",
    }).encode()  # fmt: skip
