"""`memq agent` (the real process) under connection pressure and on deeply nested JSON."""

from __future__ import annotations

import asyncio
import json
import selectors
import socket
import sys
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import decode_event
from tests.support.agent_process import PREFIX, SESSION, agent_process, tool_payload
from worker.keys import Keys

pytestmark = pytest.mark.slow  # runs memq agent processes

OPEN_FILES = 256  # the child's limit: the cap is then 128 connections
IDLE = 300
REFUSAL = (
    "memq agent: 128 connections are open, the most it keeps (MEMQ_AGENT_MAX_CONNECTIONS,"
    " at most half the open-file limit): try again shortly\n"
)


async def _tool_use_ids(redis: aioredis.Redis) -> list[str]:
    entries = await redis.xrange(Keys(PREFIX).events(SESSION))
    return [decode_event(f[b"event"]).tool_use_id for _, f in entries]  # type: ignore[union-attr]


def _readable(
    socks: list[socket.socket], wait_s: float
) -> tuple[list[socket.socket], list[socket.socket]]:
    """The sockets with nothing to read after `wait_s`, and those the server wrote to or closed."""
    with selectors.DefaultSelector() as selector:
        for s in socks:
            selector.register(s, selectors.EVENT_READ)
        time.sleep(wait_s)
        ready = {key.fileobj for key, _ in selector.select(0)}
    return [s for s in socks if s not in ready], [s for s in socks if s in ready]


def _answer(sock: socket.socket, timeout_s: float) -> bytes:
    """What the server sent until it closed (or `timeout_s` passed)."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except TimeoutError:
        return data + b"<open>"
    return data


async def test_idle_connections_past_the_cap_are_refused_then_closed_and_hooks_go_on(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    with agent_process(
        tmp_path, redis_url, max_open_files=OPEN_FILES, agent_idle_timeout_s="2"
    ) as agent:
        assert agent.post(tool_payload("toolu_before")).status_code == 200
        # Before: idle connections past the open-file limit made every hook POST fail with
        # a reset (uvicorn never times out a connection that sends no request).
        idle = [socket.create_connection(("127.0.0.1", int(agent.url.rsplit(":", 1)[1])))
                for _ in range(IDLE)]  # fmt: skip
        try:
            await asyncio.sleep(0.3)
            assert agent.open_fds() < OPEN_FILES
            _, answered = _readable(idle, 0.2)
            refused = [_answer(s, 0.5) for s in answered]
            assert len(refused) == IDLE - 128
            assert {a.split(b"\r\n\r\n", 1)[1].decode() for a in refused} == {REFUSAL}
            assert all(a.startswith(b"HTTP/1.1 503 ") for a in refused)
            full = agent.post(tool_payload("toolu_refused"))
            assert (full.status_code, full.text) == (503, REFUSAL)  # a clear refusal, no reset
            # MEMQ_AGENT_IDLE_TIMEOUT_S: the server closes the ones that never sent a request.
            started = time.monotonic()
            kept, _ = _readable(idle, 0)
            assert len(kept) == 128
            assert {_answer(s, 4) for s in kept} == {b""}
            closed_after_s = time.monotonic() - started
        finally:
            for s in idle:
                s.close()
        for i in range(5):
            assert agent.post(tool_payload(f"toolu_after{i}")).status_code == 200
        assert agent.healthz().status_code == 200
        code, _ = agent.stop()
    assert code == 0
    assert closed_after_s < 3.5
    assert await _tool_use_ids(redis) == ["toolu_before", *(f"toolu_after{i}" for i in range(5))]
    assert "Too many open files" not in agent.log()


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = {"a": [value]}
    return value


@pytest.mark.parametrize("levels", [600, 20_000])
async def test_deeply_nested_json_gets_a_400_with_one_line_and_hooks_go_on(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, levels: int
) -> None:
    payload = json.loads(tool_payload("toolu_deep"))
    payload["tool_input"] = _nested(levels // 2)  # an object and a list per step
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(levels * 4)
    try:
        body = json.dumps(payload).encode()
    finally:
        sys.setrecursionlimit(limit)
    with agent_process(tmp_path, redis_url) as agent:
        reply = agent.post(body)
        assert reply.status_code == 400
        assert reply.text == (
            "memq agent: hook input nested more than 100 levels deep (memq's limit):"
            " not published\n"
        )
        assert agent.post(tool_payload("toolu_after")).status_code == 200
        code, _ = agent.stop()
    assert code == 0
    assert "Traceback" not in agent.log()
    assert await _tool_use_ids(redis) == ["toolu_after"]
