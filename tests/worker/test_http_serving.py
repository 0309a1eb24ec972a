"""`serve_until_stopped`, the loop the web UI and the hook endpoint share."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from worker.http_serving import Listener, ListenError, serve_until_stopped

LOGGER = logging.getLogger("tests.http_serving")


async def _hello(request: Request) -> Response:
    return PlainTextResponse("hello\n")


APP = Starlette(routes=[Route("/hello", _hello)])


async def _serving(stop: asyncio.Event | None) -> tuple[asyncio.Task[None], str, list[str]]:
    """Start serving APP on a free loopback port; the task, the announced URL, the events."""
    events: list[str] = []
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_until_stopped(
            APP, Listener(host="127.0.0.1", port=0, stop=stop, on_listening=listening.set_result),
            logger=LOGGER, announce="test app on %s", path="/hello",
            on_stop=lambda: events.append("on_stop"),
        )
    )  # fmt: skip
    await asyncio.wait({task, listening}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    assert not task.done(), "it stopped before it listened"
    return task, listening.result(), events


async def test_serves_until_stop_is_set_then_closes_the_socket(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stop = asyncio.Event()
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        task, url, events = await _serving(stop)
        async with httpx.AsyncClient() as client:
            response = await client.get(url)
        assert (response.status_code, response.text) == (200, "hello\n")
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/hello")
        assert [(r.getMessage(), r.__dict__["url"]) for r in caplog.records] == [
            (f"test app on {url}", url)
        ]

        stop.set()
        await asyncio.wait_for(task, 10)

    assert events == ["on_stop"]
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(url)


async def test_on_its_own_sigterm_stops_it_and_the_handlers_go() -> None:
    loop = asyncio.get_running_loop()
    task, _, events = await _serving(None)

    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 10)

    assert events == ["on_stop"]
    assert task.exception() is None
    # The loop's SIGTERM handler is gone again: removing it now finds nothing to remove.
    assert not loop.remove_signal_handler(signal.SIGTERM)


async def test_a_taken_port_is_a_listen_error() -> None:
    stop = asyncio.Event()
    task, url, _ = await _serving(stop)
    port = httpx.URL(url).port
    try:
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve_until_stopped(
                APP, Listener(host="127.0.0.1", port=port or 0), logger=LOGGER, announce="%s"
            )
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
