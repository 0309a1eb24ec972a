"""The worker's probes: /metrics (prometheus-client's ASGI app), /healthz, /readyz (Starlette)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import make_asgi_app
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from worker.connect.primary import connected_primary
from worker.http_serving import EmbeddedHttp
from worker.keys import Keys
from worker.limits.pauses import Pauses
from worker.ops.silence import silent_sessions
from worker.ops.stats import stream_stats
from worker.settings import Settings
from worker.storage.factory import open_store
from worker.storage.protocol import Store, StoreError, StoreUnavailableError
from worker.storage.sql.store import one_line
from worker.telemetry.metrics import FleetFigures, Metrics

logger = logging.getLogger(__name__)

PING_TIMEOUT_S = 2.0
SCRAPE_TIMEOUT_S = 10.0
_PROBES = ["GET", "HEAD"]


class HealthServer:
    """Answers probes and scrapes; a Redis or store outage shows in /readyz, never stops it."""

    def __init__(self, settings: Settings, redis: Redis, store: Store, metrics: Metrics) -> None:
        self.settings = settings
        self.redis = redis
        self.store = store
        self.metrics = metrics
        self.keys = Keys(settings.prefix)
        self._http: EmbeddedHttp | None = None
        self.url = ""  # the base URL, once listening

    async def start(self, host: str, port: int) -> str:
        """Listen on host:port (0: any free port); returns the base URL."""
        self._http = EmbeddedHttp(self.app(), what="metrics")
        self.url = await self._http.start(host, port)
        return self.url

    async def aclose(self) -> None:
        """Stop listening."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def app(self) -> Starlette:
        """The three routes; any other path or method gets a one-line hint."""
        return Starlette(
            routes=[
                Route("/healthz", self._healthz, methods=_PROBES),
                Route("/readyz", self._readyz, methods=_PROBES),
                Route(
                    "/metrics",
                    _RefreshFirst(self, make_asgi_app(self.metrics.registry)),
                    methods=_PROBES,
                ),
            ],
            exception_handlers={404: _not_found, 405: _not_allowed, Exception: _failed},
        )

    async def unready_reason(self) -> str | None:
        """None when Redis and the store answer and the last commit worked, else one line
        saying which does not."""
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await self.redis.ping()
        except (RedisError, OSError, TimeoutError) as e:
            return f"redis unreachable: {one_line(e)}"
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await self.store.ping()
        except (StoreError, OSError, TimeoutError) as e:
            return f"store unreachable: {one_line(e)}"
        # The store answers a ping, yet its writes may fail (a malformed database file).
        if (failure := self.metrics.commit_failure) is not None:
            return f"store failing commits: {failure}"
        return None

    async def fleet_figures(self) -> FleetFigures:
        """Read the fleet-wide gauges from Redis and the store."""
        streams = await stream_stats(self.redis, self.keys)
        # Without a vector index the vector queue is never drained: no lag to report.
        off = self.settings.chroma == "off"
        lag = 0 if off else await self.store.vector_lag()
        oldest_ms = None if off else await self.store.vector_oldest_pending_ms()
        return FleetFigures(
            stream_pending=streams.pending,
            oldest_pending_s=streams.oldest_pending_age_s or 0.0,
            paused_providers=await Pauses(self.redis, self.keys).paused_providers(),
            dead_letters=await self.redis.xlen(self.keys.dead),
            vector_lag=lag,
            vector_oldest_pending_s=0.0
            if oldest_ms is None
            else max(0.0, time.time() - oldest_ms / 1000),
            silent_sessions=await silent_sessions(
                self.redis,
                self.keys,
                self.store,
                threshold_s=self.settings.silent_alert_s,
                now_s=time.time(),
            ),
        )

    async def refresh(self) -> None:
        """Refresh the fleet gauges before a scrape; when that fails they stay as they were."""
        try:
            async with asyncio.timeout(SCRAPE_TIMEOUT_S):
                # The primary first: it is known even while the store is out.
                self.metrics.set_redis_primary(connected_primary(self.redis))
                self.metrics.set_fleet(await self.fleet_figures())
        except StoreUnavailableError as e:  # the store warned once for its outage
            logger.debug("metrics: fleet gauges not refreshed: %s", one_line(e))
        except (RedisError, OSError, StoreError, TimeoutError) as e:
            logger.warning("metrics: fleet gauges not refreshed: %s", one_line(e))

    async def _healthz(self, _: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def _readyz(self, _: Request) -> Response:
        reason = await self.unready_reason()
        if reason is None:
            return PlainTextResponse("ready\n")
        return PlainTextResponse(f"{reason}\n", status_code=503)


class _RefreshFirst:
    """prometheus-client's ASGI app, after refreshing the gauges read from Redis and the store."""

    def __init__(self, health: HealthServer, render: ASGIApp) -> None:
        self.health = health
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.health.refresh()
        await self.render(scope, receive, send)


async def _not_found(_: Request, __: Exception) -> Response:
    return PlainTextResponse("not found: try /metrics, /healthz or /readyz\n", status_code=404)


async def _not_allowed(_: Request, e: Exception) -> Response:
    headers = e.headers if isinstance(e, HTTPException) else None
    return PlainTextResponse("only GET and HEAD\n", status_code=405, headers=headers)


async def _failed(_: Request, __: Exception) -> Response:
    # Starlette re-raises after this answer: uvicorn logs the traceback.
    return PlainTextResponse("internal error (see the worker log)\n", status_code=500)


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
