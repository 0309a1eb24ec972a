"""The short wait of a session's read, against a real redis-server: a burst shares one turn,
a summary request or the session's end goes at once, whatever a tool's input holds."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from pipeline.events import End, Event, encode_event
from tests.support.worker_harness import summarize, tool_call
from worker.keys import Keys
from worker.queue.streams import SessionStream
from worker.sessions.turn_reads import read_batch

KEYS = Keys("t")
SESSION = "s1"
WAIT_MS = 1500  # long enough that the second entry lands inside it on a loaded machine


async def _read_with_a_late_second(redis: aioredis.Redis, first: Event) -> list[str]:
    """Publish `first`, start the read, publish a second call 50 ms in; the events read."""
    stream = SessionStream(redis, KEYS, SESSION, "consumer-a")
    await stream.ensure_group()
    await redis.xadd(KEYS.events(SESSION), {"event": encode_event(first)})
    reading = asyncio.create_task(read_batch(stream, 8, WAIT_MS, claim=False))
    await asyncio.sleep(0.05)
    second = tool_call(SESSION, 2)
    await redis.xadd(KEYS.events(SESSION), {"event": encode_event(second)})
    return [e.raw.decode() if e.raw else "" for e in await reading]


async def test_a_tool_input_with_an_end_key_waits_for_the_burst_like_any_call(
    redis: aioredis.Redis,
) -> None:
    # The old check searched the raw JSON for b'"end"' and flushed this call alone.
    first = tool_call(SESSION, 1, tool="Read", tool_input={"start": 1, "end": 9, "x": "summarize"})
    read = await _read_with_a_late_second(redis, first)
    assert len(read) == 2
    assert '"end":9' in read[0]


async def test_the_sessions_end_and_a_summary_request_go_at_once(redis: aioredis.Redis) -> None:
    end = End(event_id="s1-end", memory_session_id=SESSION, project="demo",
              occurred_at=summarize(SESSION).occurred_at)  # fmt: skip
    assert len(await _read_with_a_late_second(redis, end)) == 1
    await redis.delete(KEYS.events(SESSION))
    assert len(await _read_with_a_late_second(redis, summarize(SESSION))) == 1
