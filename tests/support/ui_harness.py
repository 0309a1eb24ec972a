"""Run `memq ui` in-process on a free loopback port, with settings a test machine would use."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from worker.fanout.ui.server import run_ui
from worker.http_serving import Listener
from worker.settings import Settings, load_settings


def ui_settings(data_dir: Path, redis_url: str, **extra: str) -> Settings:
    """Settings for a UI on the test Redis, storing in `data_dir`."""
    env = {"MEMQ_DATA_DIR": str(data_dir), "MEMQ_REDIS_URL": redis_url, "MEMQ_PREFIX": "ui"}
    env |= {f"MEMQ_{k.upper()}": v for k, v in extra.items()}
    return load_settings(env)


@asynccontextmanager
async def running_ui(
    settings: Settings, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """Serve the UI until the block ends; yields its base URL (ending in `/`)."""
    stop = asyncio.Event()
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_ui(
            settings, Listener(host=host, port=port, stop=stop, on_listening=listening.set_result)
        )
    )
    await asyncio.wait({task, listening}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # raises what stopped it
        raise RuntimeError("the UI stopped before it listened")
    try:
        yield listening.result()
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def read_events(response: httpx.Response, count: int) -> list[dict[str, str]]:
    """The next `count` Server-Sent Events of a stream as field dicts (`id`, `event`, `data`)."""
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    async with asyncio.timeout(5):
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                current[name] = value
                continue
            if "data" in current:
                events.append(current)
                if len(events) == count:
                    return events
            current = {}
    raise AssertionError(f"stream ended after {len(events)} of {count} events")
