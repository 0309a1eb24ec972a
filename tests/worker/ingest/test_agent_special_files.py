"""`memq agent` (the real process) on Reads of a FIFO and /dev/zero, and on a stuck spool."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import ToolCall, decode_event
from tests.support.agent_process import PREFIX, SESSION, agent_process, tool_payload
from tests.support.ingest import closed_port_url
from worker.ingest.agent import STOP_DEADLINE_S
from worker.ingest.spool import Spool
from worker.keys import Keys

pytestmark = pytest.mark.slow  # runs memq agent processes


async def _calls(redis: aioredis.Redis, n: int, timeout_s: float = 10) -> list[ToolCall]:
    deadline = time.monotonic() + timeout_s
    while True:
        entries = await redis.xrange(Keys(PREFIX).events(SESSION))
        if len(entries) >= n or time.monotonic() > deadline:
            calls = [decode_event(fields[b"event"]) for _, fields in entries]
            assert all(isinstance(c, ToolCall) for c in calls)
            return calls  # type: ignore[return-value]
        await asyncio.sleep(0.05)


async def test_fifo_and_dev_zero_reads_neither_hang_nor_spin_and_sigterm_stops_it(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with agent_process(tmp_path, redis_url) as agent:
        cpu_before = agent.cpu_s()
        # Before: each FIFO read held a worker thread in open() for good; after six, every
        # hook request timed out while /healthz still said 200.
        for i in range(6):
            reply = agent.post(tool_payload(f"toolu_fifo{i}", "Read", file_path=str(fifo)))
            assert (reply.status_code, reply.text) == (200, "")
        reply = agent.post(tool_payload("toolu_zero", "Read", file_path="/dev/zero"))
        assert (reply.status_code, reply.text) == (200, "")
        for i in range(10):
            assert agent.post(tool_payload(f"toolu_bash{i}"), timeout_s=2).status_code == 200
        assert agent.healthz().status_code == 200
        calls = await _calls(redis, 17)
        await asyncio.sleep(1.0)  # a /dev/zero reader would have burnt this second at 100 %
        assert agent.cpu_s() - cpu_before < 0.8
        code, took_s = agent.stop()
    assert code == 0, agent.log()
    assert took_s < STOP_DEADLINE_S
    assert [c.tool_use_id for c in calls] == [
        *(f"toolu_fifo{i}" for i in range(6)), "toolu_zero", *(f"toolu_bash{i}" for i in range(10))
    ]  # fmt: skip
    assert calls[0].file_hashes == {str(fifo): None}
    assert calls[6].file_hashes == {"/dev/zero": None}


def test_a_stuck_spool_turns_healthz_503_and_sigterm_still_stops_it(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir(mode=0o700)
    # Another process holding the spool's append lock stands in for a hung disk: Redis is
    # away, so the publisher spools, and that append waits for good.
    lock = os.open(spool_dir / "append.lock", os.O_RDWR | os.O_CREAT, 0o600)
    agent_cm = agent_process(
        tmp_path, closed_port_url(), agent_stall_s="1", hook_redis_timeout_ms="100"
    )
    with agent_cm as agent:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert agent.post(tool_payload("toolu_1")).status_code == 200  # queued: not yet stuck
        time.sleep(1.5)
        health = agent.healthz()
        assert health.status_code == 503
        assert health.text.startswith("memq agent: the publisher has made no progress for ")
        assert f"the spool in {spool_dir} is not answering" in health.text
        assert health.text.count("\n") == 1
        started = time.monotonic()
        late = agent.post(tool_payload("toolu_2"))
        assert time.monotonic() - started < 3  # answered after MEMQ_AGENT_STALL_S, not hung
        assert late.status_code == 503
        assert "not spooled within 1 s (MEMQ_AGENT_STALL_S)" in late.text
        assert late.text.count("\n") == 1
        fcntl.flock(lock, fcntl.LOCK_UN)  # the disk answers again
        deadline = time.monotonic() + 5
        while agent.healthz().status_code != 200:
            assert time.monotonic() < deadline, agent.log()
            time.sleep(0.1)
        assert agent.post(tool_payload("toolu_3")).status_code == 200
        fcntl.flock(lock, fcntl.LOCK_EX)  # stuck again (Redis still away), then told to stop
        assert agent.post(tool_payload("toolu_4")).status_code == 503
        code, took_s = agent.stop()
    os.close(lock)
    assert took_s < STOP_DEADLINE_S + 1, agent.log()
    assert code == 1
    assert "still not stopped" in agent.log()
    # Nothing taken before the stall was lost: 1 and 2 (waited in memory) and 3 were spooled.
    assert Spool(spool_dir, 1 << 30).status().events >= 3
