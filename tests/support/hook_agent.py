"""Helpers for the HTTP hook tests: Claude Code payloads, `run_agent` in the test's loop."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis

from pipeline.events import Event, decode_event
from worker.http_serving import Listener
from worker.ingest.agent import HOOK_PATH, run_agent
from worker.keys import Keys
from worker.settings import Settings

DATA = Path(__file__).resolve().parents[1] / "data" / "claude_code"
SESSION = "9f2c1e7a-4b3d-4e8f-a1c2-5d6e7f809a1b"  # the fixtures' session_id
KINDS = [
    ("user_prompt_submit.json", "prompt"),
    ("post_tool_use.json", "tool_call"),
    ("stop.json", "summarize"),
    ("session_end.json", "end"),
]
PREFIX = "http"


def payload(name: str, **changes: Any) -> bytes:
    """A fixture hook input from tests/data/claude_code, with fields changed."""
    data = json.loads((DATA / name).read_text())
    data.update(changes)
    if data.get("transcript_path") == "TRANSCRIPT":
        data["transcript_path"] = str(DATA / "transcript.jsonl")
    return json.dumps(data).encode()


def agent_settings(data_dir: Path, redis_url: str, **changes: Any) -> Settings:
    """Settings of an agent on the test's Redis and data dir, under PREFIX."""
    return Settings(redis_url=redis_url, prefix=PREFIX, data_dir=str(data_dir), **changes)


@asynccontextmanager
async def running_agent(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The endpoint on a free loopback port, and a client on its base URL."""
    stop = asyncio.Event()
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_agent(
            settings,
            Listener(host="127.0.0.1", port=0, stop=stop, on_listening=listening.set_result),
        )
    )
    await asyncio.wait([task, listening], timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        await task  # raises why it did not start
    url = listening.result()
    try:
        async with httpx.AsyncClient(base_url=url.removesuffix(HOOK_PATH), timeout=10) as client:
            yield client
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def stream(client: aioredis.Redis, prefix: str = PREFIX) -> list[Event]:
    """The events published for SESSION under `prefix`, in stream order."""
    entries = await client.xrange(Keys(prefix).events(SESSION))
    return [decode_event(fields[b"event"]) for _, fields in entries]


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 5.0) -> None:
    """Wait until `check()` is true; fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def has_events(
    client: aioredis.Redis, n: int, prefix: str = PREFIX
) -> Callable[[], Awaitable[bool]]:
    """A check for `eventually`: SESSION's stream holds at least `n` events."""

    async def check() -> bool:
        return len(await stream(client, prefix)) >= n

    return check
