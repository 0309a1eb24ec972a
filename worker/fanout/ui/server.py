"""Run the web UI under uvicorn: bind, serve, stop on a signal or when the host process says."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import uvicorn

from pipeline.prompting.mode_files import load_mode
from worker.connect.redis_client import connect_redis
from worker.fanout.ui.app import UiDeps, build_app, check_bind
from worker.fanout.ui.live import FeedHub
from worker.fanout.ui.pages import TypeLabel
from worker.http_serving import QuietServer, base_url, listen
from worker.keys import Keys
from worker.ops.cost import prices_from
from worker.settings import Settings
from worker.storage.factory import open_store

logger = logging.getLogger(__name__)


class _DropColorMessage(logging.Filter):
    """uvicorn adds an ANSI-coloured copy of some messages; memq's formatters print extras."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.__dict__.pop("color_message", None)
        return True


_DROP_COLOR_MESSAGE = _DropColorMessage()


def type_labels(settings: Settings) -> dict[str, TypeLabel]:
    """The mode's observation types as the cards show them (emoji, label)."""
    mode = load_mode(settings.mode, extra_dirs=settings.extra_modes_dirs)
    return {t.id: TypeLabel(t.emoji, t.label) for t in mode.observation_types}


async def run_ui(
    settings: Settings,
    *,
    host: str,
    port: int,
    stop: asyncio.Event | None = None,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM, or, when `stop` is given, until it is set."""
    token = settings.ui_token.reveal() if settings.ui_token else None
    check_bind(host, token)
    logging.getLogger("uvicorn.error").addFilter(_DROP_COLOR_MESSAGE)  # added once, however often
    labels = await asyncio.to_thread(type_labels, settings)
    redis = await connect_redis(settings)
    store = open_store(settings)
    try:
        await store.ping()
        sock = listen(host, port)
        keys = Keys(settings.prefix)
        deps = UiDeps(
            redis, keys, store, labels, token, settings.ui_max_streams, prices_from(settings)
        )
        app = build_app(deps)
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,  # a `?token=` in a URL must not reach the logs
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config) if stop is None else QuietServer(config)
        url = f"{base_url(sock)}/"
        logger.info("web UI listening on %s", url, extra={"url": url})
        if on_listening is not None:
            on_listening(url)
        watcher = asyncio.create_task(_watch(server, app.state.hub, stop))
        try:
            await server.serve(sockets=[sock])
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            sock.close()
    finally:
        await store.aclose()
        await redis.aclose()


async def _watch(server: uvicorn.Server, hub: FeedHub, stop: asyncio.Event | None) -> None:
    # Open event streams would hold the shutdown for its grace period: end them first.
    while not server.should_exit:
        if stop is not None and stop.is_set():
            server.should_exit = True
            break
        await asyncio.sleep(0.1)
    hub.close_streams()
