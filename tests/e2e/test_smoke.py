"""A first end-to-end run: publish → worker → SQLite → feed, with the fake observer."""

from __future__ import annotations

from pathlib import Path

from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver
from tests.support.worker_harness import (
    drain,
    make_settings,
    prompt,
    publish,
    running_runtime,
    sqlite_store,
    tool_call,
)


async def test_tool_calls_become_stored_observations(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await publish(arq_redis, settings, prompt("s1", 1, "fix the login test"),
                  *[tool_call("s1", n) for n in range(1, 4)])  # fmt: skip
    async with running_runtime(settings, arq_redis) as rt:
        assert await drain(rt, arq_redis) >= 1
    store = sqlite_store(settings)
    rows = await store.observations(memory_session_id="s1")
    await store.aclose()
    assert len(rows) == 3
    assert await arq_redis.xlen(rt.keys.feed) == 3
    assert await arq_redis.xlen(rt.keys.events("s1")) == 0
