"""Read back what the worker did: stored rows, dropped replies, counters, broadcasts, streams."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import msgspec
from redis.asyncio import Redis

from tests.support.worker_harness import sqlite_store
from worker.keys import CONSUMER_GROUP, Keys
from worker.settings import Settings
from worker.storage.records import DroppedRow, StoredRow
from worker.telemetry.counters import Counters


async def stored_rows(settings: Settings, session: str | None = None) -> list[StoredRow]:
    """Every stored observation and summary (of one session), oldest first."""
    store = sqlite_store(settings)
    try:
        rows = await store.observations(memory_session_id=session, limit=100_000)
    finally:
        await store.aclose()
    return sorted(rows, key=lambda r: (r.kind, r.id))


async def observations(settings: Settings, session: str | None = None) -> list[StoredRow]:
    """Stored observations only, in id order."""
    return [r for r in await stored_rows(settings, session) if r.kind == "observation"]


async def dropped_rows(settings: Settings) -> list[DroppedRow]:
    """Every kept dropped reply (replayed ones too), oldest first."""
    store = sqlite_store(settings)
    try:
        rows = await store.dropped(limit=100_000, include_replayed=True)
    finally:
        await store.aclose()
    return sorted(rows, key=lambda r: r.id)


async def outcomes(redis: Redis, settings: Settings) -> dict[str, int]:
    """The fleet-wide outcome counters."""
    return await Counters(redis, Keys(settings.prefix)).outcomes()


async def unacked(redis: Redis, settings: Settings, session: str) -> tuple[int, int]:
    """(entries left in the session's stream, entries pending in its consumer group)."""
    key = Keys(settings.prefix).events(session)
    length = await redis.xlen(key)
    if not await redis.exists(key):
        return 0, 0
    groups: Any = await redis.xinfo_groups(key)
    pending = sum(int(g["pending"]) for g in groups if g["name"] in (CONSUMER_GROUP.encode(),))
    return int(length), pending


async def dead_letters(redis: Redis, settings: Settings) -> list[dict[str, str]]:
    """The dead-letter stream's entries as text fields, oldest first."""
    entries: Any = await redis.xrange(Keys(settings.prefix).dead)
    return [{k.decode(): v.decode("utf-8", "replace") for k, v in f.items()} for _, f in entries]


async def wait_until(
    check: Callable[[], Any], *, timeout_s: float = 10.0, what: str = "condition"
) -> Any:
    """Poll an async (or plain) check every 20 ms until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout_s}s")
        await asyncio.sleep(0.02)


class Announcements:
    """Messages received on `<prefix>:observations` while subscribed."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []


@asynccontextmanager
async def subscribed(redis_url: str, settings: Settings) -> AsyncIterator[Announcements]:
    """Collect every pub/sub announcement published while the block runs."""
    client = Redis.from_url(redis_url)
    pubsub = client.pubsub()
    await pubsub.subscribe(Keys(settings.prefix).observations)
    # The confirmation proves the server registered us before anything is published.
    confirmed = await pubsub.get_message(timeout=2.0)
    assert confirmed is not None
    assert confirmed["type"] == "subscribe"
    got = Announcements()

    async def listen() -> None:
        async for message in pubsub.listen():
            if message["type"] == "message":
                got.messages.append(msgspec.json.decode(message["data"]))

    task = asyncio.create_task(listen())
    try:
        yield got
        await asyncio.sleep(0.2)  # messages already published may still be in flight
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        await pubsub.aclose()
        await client.aclose()


def message_texts(messages: list[dict[str, Any]], role: str) -> list[str]:
    """The text of every message with this role, as a recorded request sent it."""
    texts = []
    for m in messages:
        if m.get("role") != role:
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        texts.append(str(content))
    return texts
