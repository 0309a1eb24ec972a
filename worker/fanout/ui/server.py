"""Run the web UI under uvicorn: bind, serve, stop on a signal or when the host process says."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator

import uvicorn

from pipeline.mode_files import load_mode
from worker.connect.redis_client import connect_redis
from worker.errors import WorkerError
from worker.fanout.ui.app import UiDeps, build_app, check_bind
from worker.fanout.ui.live import FeedHub
from worker.fanout.ui.pages import TypeLabel
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


class UiListenError(WorkerError):
    """The UI's address could not be bound."""


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers: the host process (`memq up`, a test) stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


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
        sock = _listen(host, port)
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
        server = uvicorn.Server(config) if stop is None else _EmbeddedServer(config)
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        url = f"http://{shown}:{bound_port}/"
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


def _listen(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        raise UiListenError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    return sock
