"""An ASGI app under uvicorn inside a running process: bind, serve in a task, stop on request."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from worker.errors import WorkerError

STOP_GRACE_S = 2


class HealthListenError(WorkerError):
    """The metrics port could not be bound."""


class _NoSignals(uvicorn.Server):
    """uvicorn without its signal handlers: they would replace arq's, which stop the worker."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class EmbeddedHttp:
    """One app on one listening socket, served by uvicorn in a background task."""

    def __init__(self, app: ASGIApp, *, what: str) -> None:
        self.app = app
        self.what = what
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> str:
        """Listen on host:port (0: any free port) and serve; returns the base URL."""
        sock = _listen(host, port, self.what)
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
        self._server = server = _NoSignals(config)
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():  # uvicorn gave up before listening: say why
                sock.close()
                await self._task
                raise HealthListenError(f"cannot serve {self.what} on {host}:{port}")
            await asyncio.sleep(0.01)
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        return f"http://{shown}:{bound_port}"

    async def aclose(self) -> None:
        """Stop serving; open connections get STOP_GRACE_S to finish."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._server = self._task = None


def _listen(host: str, port: int, what: str) -> socket.socket:
    sock: socket.socket | None = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        if sock is not None:
            sock.close()
        raise HealthListenError(f"cannot serve {what} on {host}:{port}: {e.strerror or e}") from e
    return sock
