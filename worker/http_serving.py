"""Serving HTTP from a memq process: the loopback rule, binding, uvicorn without its signals.

The metrics server, the web UI and the hook endpoint all run uvicorn inside a process that
has its own shutdown (arq's signal handlers, `memq up`, a test, or SIGINT/SIGTERM when they
run alone), and all listen on loopback unless a long enough token guards them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
import signal
import socket
from collections.abc import Callable, Iterator

import msgspec
import uvicorn
from starlette.types import ASGIApp

from worker.errors import ConfigError, WorkerError

STOP_GRACE_S = 2
MIN_TOKEN_CHARS = 16
"""Off loopback a token is all that stands between a network and memq: at least this long."""


class ListenError(WorkerError):
    """An address memq was asked to serve on could not be bound."""


class Listener(msgspec.Struct, frozen=True, kw_only=True):
    """Where a server listens, and what stops it: `stop` when given, else SIGINT/SIGTERM."""

    host: str
    port: int  # 0: a free port
    stop: asyncio.Event | None = None
    on_listening: Callable[[str], None] | None = None
    """Gets the served URL once the app has started (how tests wait for it)."""


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1, with or without [])."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token_bind(host: str, token: str | None, *, missing: str, too_short: str) -> None:
    """ConfigError when `host` is beyond loopback without a token of MIN_TOKEN_CHARS or more.

    `missing` and `too_short` are the refusals, in the words of the server being started.
    """
    if is_loopback(host):
        return
    if not token:
        raise ConfigError(missing)
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(too_short)


def is_loopback_host_header(host: str) -> bool:
    """Whether an HTTP `Host` header names a loopback host: without a token, memq serves only
    those, so a web page cannot reach it through DNS rebinding."""
    if host.startswith("["):
        name = host.split("]", 1)[0] + "]"
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return is_loopback(name)


class QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers (the host process stops it); `listening` is set
    once it accepts connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's startup, then `listening` is set."""
        await super().startup(sockets=sockets)
        if self.started:
            self.listening.set()


def listen(host: str, port: int, doing: str = "listen", *, backlog: int = 128) -> socket.socket:
    """A bound, listening socket for host:port; ListenError ("cannot <doing> on …") if not."""
    sock: socket.socket | None = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as e:
        if sock is not None:
            sock.close()
        raise ListenError(f"cannot {doing} on {host}:{port}: {e.strerror or e}") from e
    return sock


def base_url(sock: socket.socket) -> str:
    """`http://host:port` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class EmbeddedHttp:
    """One app on one listening socket, served by uvicorn in a background task."""

    def __init__(self, app: ASGIApp, *, what: str) -> None:
        self.app = app
        self.what = what
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> str:
        """Listen on host:port (0: any free port) and serve; returns the base URL."""
        sock = listen(host, port, f"serve {self.what}")
        bound_host, bound_port = sock.getsockname()[:2]
        config = uvicorn.Config(
            self.app,
            host=bound_host,
            port=bound_port,  # only for uvicorn's "running on" line: the socket is bound
            log_config=None,  # memq's logging (worker/logs.py) renders uvicorn's lines
            access_log=False,  # one line per probe every few seconds is noise
            lifespan="off",
            timeout_graceful_shutdown=STOP_GRACE_S,
        )
        self._server = server = QuietServer(config)
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():  # uvicorn gave up before listening: say why
                sock.close()
                await self._task
                raise ListenError(f"cannot serve {self.what} on {host}:{port}")
            await asyncio.sleep(0.01)
        return base_url(sock)

    async def aclose(self) -> None:
        """Stop serving; open connections get STOP_GRACE_S to finish."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._server = self._task = None


async def serve_until_stopped(
    app: ASGIApp,
    listener: Listener,
    *,
    logger: logging.Logger,
    announce: str,
    path: str = "/",
    backlog: int = 128,
    on_stop: Callable[[], None] | None = None,
    http: type[asyncio.Protocol] | None = None,
    idle_timeout_s: float = 5.0,
) -> None:
    """Serve `app` as `listener` says until SIGINT/SIGTERM, or until its `stop` is set.

    Once the app has started, `logger` logs `announce` (a %s message) with the URL of `path`,
    and `listener.on_listening` gets that URL; `on_stop` runs as the stop comes, before the
    drain. `http` replaces uvicorn's HTTP protocol (worker/http_connections.py);
    `idle_timeout_s` closes a keep-alive connection idle that long.
    """
    stop, on_listening = listener.stop, listener.on_listening
    sock = listen(listener.host, listener.port, backlog=backlog)
    config = uvicorn.Config(
        app,
        http=http or "auto",
        log_config=None,  # memq's logging (worker/logs.py) renders uvicorn's lines
        access_log=False,  # a `?token=` in a URL must not reach the logs
        lifespan="on",
        timeout_graceful_shutdown=STOP_GRACE_S,
        timeout_keep_alive=max(1, math.ceil(idle_timeout_s)),  # uvicorn takes whole seconds
    )
    server = QuietServer(config)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if stop is None else ()
    stopping = stop if stop is not None else asyncio.Event()
    for sig in signals:  # on its own: a signal stops it, and it exits 0 once drained
        loop.add_signal_handler(sig, stopping.set)
    url = f"{base_url(sock)}{path}"

    async def announce_once_listening() -> None:
        await server.listening.wait()
        logger.info(announce, url, extra={"url": url})
        if on_listening is not None:
            on_listening(url)

    async def exit_on_stop() -> None:
        await stopping.wait()
        server.should_exit = True
        if on_stop is not None:
            on_stop()

    helpers = [asyncio.create_task(announce_once_listening()), asyncio.create_task(exit_on_stop())]
    try:
        await server.serve(sockets=[sock])
    finally:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        for sig in signals:
            loop.remove_signal_handler(sig)
        sock.close()
