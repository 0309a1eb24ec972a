"""Publish → broadcast timing shared by the throughput and overhead benches: tokened tool calls,
steady-rate publishing with a subscriber, and the fake observer's per-token delay."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import redis.asyncio as aioredis

from bench.common import WorkerProcesses
from pipeline.events import ToolCall
from tests.support.fake_observer import RecordedRequest, Reply, deterministic_reply
from worker.ingest.producer import Producer, prepare_event

TOKEN = re.compile(r"\bL(\d{8})\b")
_LINE = "tests/test_cart.py::test_discount_{j} PASSED [{p:3d}%] in 0.0{d}s (cart total 90.00)\n"
_GOLDEN = 0.6180339887498949


class CallMaker:
    """Builds ~2 KB Bash calls; each command opens with a unique token that the title shows."""

    def __init__(self, output_chars: int) -> None:
        lines = (_LINE.format(j=j, p=j % 100, d=j % 10) for j in range(output_chars // 50 + 1))
        self.output = "".join(lines)[:output_chars]
        self.last_token = 0

    def call(self, session: str, n: int) -> ToolCall:
        self.last_token += 1
        token = self.last_token
        return ToolCall(
            event_id=f"{session}-{n}-{token}",
            memory_session_id=session,
            project="shop",
            occurred_at=datetime.now(UTC),
            tool_name="Bash",
            tool_input={"command": f"L{token:08d} pytest tests/test_cart.py -k discount_{n}"},
            tool_output={"stdout": self.output, "stderr": "", "interrupted": False},
            cwd="/home/dev/shop",
        )

    def interleaved(self, tag: str, sessions: int, calls: int) -> list[ToolCall]:
        """`calls` events for each session, round-robin (as concurrent agents publish them)."""
        return [self.call(f"{tag}-s{s}", n) for n in range(calls) for s in range(sessions)]


def token_of(event: ToolCall) -> int:
    match = TOKEN.search(event.tool_input["command"])
    assert match is not None
    return int(match[1])


def token_delay_s(token: int, low_s: float, high_s: float) -> float:
    """The fake observer's delay for a turn whose last tool call carries `token`.

    Spread evenly over low..high (golden-ratio steps), and known to the bench, so each event's
    observer time can be taken out of its publish → broadcast latency.
    """
    return low_s + (high_s - low_s) * ((token * _GOLDEN) % 1.0)


def keyed_observer(low_s: float, high_s: float) -> Callable[[RecordedRequest], Reply]:
    """A fake-observer responder that answers after `token_delay_s` of the turn's last token."""

    def answer(request: RecordedRequest) -> Reply:
        reply = deterministic_reply(request)
        tokens = TOKEN.findall(request.user)  # the turn's tool calls come last in the message
        delay = token_delay_s(int(tokens[-1]), low_s, high_s) if tokens else low_s
        return msgspec.structs.replace(reply, delay_s=delay)

    return answer


async def steady(
    producer: Producer, client: aioredis.Redis, channel: str, workers: WorkerProcesses,
    events: list[ToolCall], rate: float, settle_s: float = 20.0,
) -> tuple[dict[int, float], int, float]:  # fmt: skip
    """Publish at `rate` events/s: latency (ms) per received token, missing count, rate reached.

    Publish time is taken before the call, receive time when the subscriber reads the message.
    """
    received: dict[int, float] = {}
    pubsub = client.pubsub()
    await pubsub.subscribe(channel)
    await pubsub.get_message(timeout=1.0)  # the subscribe confirmation

    async def listen() -> None:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is not None:
                now = time.perf_counter()
                match = TOKEN.search(msgspec.json.decode(message["data"]).get("title") or "")
                if match:
                    received[int(match[1])] = now

    listener = asyncio.create_task(listen())
    tokens = [token_of(e) for e in events]
    published: dict[int, float] = {}
    started = time.perf_counter()
    sent = 0
    while sent < len(events):
        due = min(len(events), int((time.perf_counter() - started) * rate) + 1)
        if due > sent:
            now = time.perf_counter()
            published.update((t, now) for t in tokens[sent:due])
            await producer.publish_many(
                [prepare_event(e, producer.settings) for e in events[sent:due]]
            )
            sent = due
        await asyncio.sleep(0.002)
    reached = len(events) / (time.perf_counter() - started)
    deadline = time.monotonic() + settle_s
    while len(received) < len(tokens) and time.monotonic() < deadline:
        workers.check_alive()
        await asyncio.sleep(0.05)
    listener.cancel()
    await asyncio.gather(listener, return_exceptions=True)
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    latencies = {t: (received[t] - published[t]) * 1000 for t in tokens if t in received}
    return latencies, len(tokens) - len(latencies), reached
