"""The worker's small HTTP server: /metrics (Prometheus text), /healthz and /readyz."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.errors import WorkerError
from worker.keys import Keys
from worker.limits.pauses import Pauses
from worker.ops.silence import silent_sessions
from worker.ops.stats import stream_stats
from worker.settings import Settings
from worker.storage.factory import open_store
from worker.storage.protocol import Store, StoreError
from worker.telemetry.metrics import FleetFigures, Metrics

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 5.0
PING_TIMEOUT_S = 2.0
SCRAPE_TIMEOUT_S = 10.0
_MAX_HEADER_LINES = 100
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip
_TEXT = "text/plain; charset=utf-8"


class HealthListenError(WorkerError):
    """The metrics port could not be bound."""


class HealthServer:
    """Answers probes and scrapes; a Redis or store outage shows in /readyz, never stops it."""

    def __init__(self, settings: Settings, redis: Redis, store: Store, metrics: Metrics) -> None:
        self.settings = settings
        self.redis = redis
        self.store = store
        self.metrics = metrics
        self.keys = Keys(settings.prefix)
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> str:
        """Listen on host:port (0: any free port); returns the base URL."""
        try:
            self._server = await asyncio.start_server(self._serve, host, port)
        except OSError as e:
            raise HealthListenError(f"cannot serve metrics on {host}:{port}: {e.strerror}") from e
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        return f"http://{shown}:{bound_port}"

    async def aclose(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def unready_reason(self) -> str | None:
        """None when Redis and the store answer, else one line saying which does not."""
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await self.redis.ping()
        except (RedisError, OSError, TimeoutError) as e:
            return f"redis unreachable: {_one_line(e)}"
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await self.store.ping()
        except (StoreError, OSError, TimeoutError) as e:
            return f"store unreachable: {_one_line(e)}"
        return None

    async def fleet_figures(self) -> FleetFigures:
        """Read the fleet-wide gauges from Redis and the store."""
        streams = await stream_stats(self.redis, self.keys)
        # Without a vector index the outbox is never drained: no lag to report.
        lag = 0 if self.settings.chroma == "off" else await self.store.vector_lag()
        return FleetFigures(
            stream_pending=streams.pending,
            oldest_pending_s=streams.oldest_pending_age_s or 0.0,
            paused_providers=await Pauses(self.redis, self.keys).paused_providers(),
            dead_letters=await self.redis.xlen(self.keys.dead),
            vector_lag=lag,
            silent_sessions=await silent_sessions(
                self.redis,
                self.keys,
                self.store,
                threshold_s=self.settings.silent_alert_s,
                now_s=time.time(),
            ),
        )

    async def scrape(self) -> bytes:
        """Refresh the gauges (kept as they were when that fails), then render every metric."""
        try:
            async with asyncio.timeout(SCRAPE_TIMEOUT_S):
                self.metrics.set_fleet(await self.fleet_figures())
        except (RedisError, OSError, StoreError, TimeoutError) as e:
            logger.warning("metrics: fleet gauges not refreshed: %s", _one_line(e))
        return self.metrics.render()

    async def _route(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method not in ("GET", "HEAD"):
            return 405, _TEXT, b"only GET and HEAD\n"
        if path == "/healthz":
            return 200, _TEXT, b"ok\n"
        if path == "/readyz":
            reason = await self.unready_reason()
            return (
                (200, _TEXT, b"ready\n") if reason is None else (503, _TEXT, f"{reason}\n".encode())
            )
        if path == "/metrics":
            return 200, self.metrics.content_type, await self.scrape()
        return 404, _TEXT, b"not found: try /metrics, /healthz or /readyz\n"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                method, path = await _read_request(reader)
            try:
                status, content_type, body = await self._route(method, path)
            except Exception:
                logger.exception("metrics: %s %s failed", method, path)
                status, content_type, body = 500, _TEXT, b"internal error (see the worker log)\n"
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + (b"" if method == "HEAD" else body))
            await writer.drain()
        except _BadRequest:
            writer.write(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        except (TimeoutError, ConnectionError):
            pass  # a client that went away or never finished its request
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


class _BadRequest(Exception):
    pass


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The method and path of one request; its headers are read and ignored."""
    try:
        request_line = (await reader.readline()).decode("latin-1")
        for _ in range(_MAX_HEADER_LINES):
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
        else:
            raise _BadRequest
    except ValueError as e:  # a line over the reader's limit
        raise _BadRequest from e
    parts = request_line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _BadRequest
    return parts[0].upper(), parts[1].split("?", 1)[0]


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


@asynccontextmanager
async def serve_health(
    settings: Settings, redis: Redis, metrics: Metrics, *, host: str, port: int
) -> AsyncIterator[HealthServer]:
    """Serve /metrics, /healthz and /readyz while inside."""
    store = open_store(settings)  # its own handle: a probe never waits behind a job's query
    server = HealthServer(settings, redis, store, metrics)
    try:
        url = await server.start(host, port)
        logger.info("metrics and health on %s/metrics", url, extra={"url": url})
        yield server
    finally:
        await server.aclose()
        await store.aclose()
