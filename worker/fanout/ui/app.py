"""`memq ui`: a Starlette app with the live feed (SSE), filters, search, sessions and stats."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from worker.fanout.feed_items import newest_feed_id
from worker.fanout.ui.auth import Guard
from worker.fanout.ui.filters import (
    BadFilterError,
    Filters,
    events_url,
    find_rows,
    is_session_id,
    no_nul,
    read_filters,
)
from worker.fanout.ui.live import FeedHub, TooManyStreamsError, event_stream, is_stream_id
from worker.fanout.ui.pages import Pages, TypeLabel
from worker.http_serving import MIN_TOKEN_CHARS, check_token_bind
from worker.keys import Keys
from worker.ops.cost import CostReader, Prices
from worker.ops.stats import collect_stats
from worker.storage.protocol import SearchTimeoutError, Store

logger = logging.getLogger(__name__)

_LIST_LIMIT = 100
_READY_TIMEOUT_S = 5.0
_COST_MAX_AGE_S = 30.0  # the panel's cost figures and charts are at most this old


def check_bind(host: str, token: str | None) -> None:
    """ConfigError when the UI would listen beyond loopback without a long MEMQ_UI_TOKEN."""
    check_token_bind(
        host,
        token,
        missing=(
            f"refusing to serve the UI on {host} without MEMQ_UI_TOKEN: set a token,"
            " or bind 127.0.0.1"
        ),
        too_short=(
            f"refusing to serve the UI on {host} with a {len(token or '')}-character"
            f" MEMQ_UI_TOKEN: use at least {MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 16`),"
            " or bind 127.0.0.1"
        ),
    )


@dataclass(frozen=True, slots=True)
class UiDeps:
    """What the app reads from: Redis (feed, stats) and the store; the mode's type labels."""

    redis: Redis
    keys: Keys
    store: Store
    types: dict[str, TypeLabel]
    token: str | None = None
    max_streams: int = 64  # open event streams (MEMQ_UI_MAX_STREAMS)
    prices: Prices | None = None  # MEMQ_PRICE_*_PER_MTOK, for the panel's spend figure


def build_app(deps: UiDeps) -> Starlette:
    """The ASGI app; its lifespan runs the feed reader."""
    pages = Pages(deps.types)
    # Per-day figures: a panel refreshing every 5 s need not re-read them each time.
    cost = CostReader(deps.store, deps.prices, max_age_s=_COST_MAX_AGE_S)
    hub = FeedHub(deps.redis, deps.keys, pages.card, deps.max_streams)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(hub.consumer.run())
        try:
            # Serve once the reader knows its start, so a row announced now is not missed.
            await asyncio.wait_for(hub.consumer.wait_ready(), _READY_TIMEOUT_S)
        except TimeoutError:
            logger.warning("feed reader not ready yet (Redis slow?); serving anyway")
        try:
            yield
        finally:
            hub.consumer.stop()
            await asyncio.gather(task, return_exceptions=True)

    async def index(request: Request) -> Response:
        filters = read_filters(request.query_params)
        last_event_id = await newest_feed_id(deps.redis, deps.keys) or ""  # before the rows
        rows = await find_rows(deps.store, filters, _LIST_LIMIT)
        html = pages.index(
            rows,
            filters=filters,
            sessions=await deps.store.sessions(limit=200),
            stats=await _stats(deps, cost),
            last_event_id=last_event_id,
            events_url=events_url(filters),
        )
        return HTMLResponse(html)

    async def session(request: Request) -> Response:
        sid = _session_id(request)
        last_event_id = await newest_feed_id(deps.redis, deps.keys) or ""  # before the rows
        entries = await deps.store.timeline(sid)
        html = pages.session(
            sid,
            entries,
            last_event_id=last_event_id,
            events_url=events_url(Filters(session=sid)),
        )
        return HTMLResponse(html)

    async def events(request: Request) -> Response:
        last_id = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        if last_id and not is_stream_id(last_id):
            return JSONResponse({"error": "Last-Event-ID is not a feed id"}, 400)
        only = request.query_params.get("session")
        if only is not None and not is_session_id(only):
            return JSONResponse({"error": "session is not a session id"}, 400)
        filters = read_filters(request.query_params)
        try:
            queue = hub.subscribe()  # before the replay: nothing falls between the two
        except TooManyStreamsError as e:
            return JSONResponse({"error": str(e)}, 503, headers={"Retry-After": "5"})
        # The live feed applies the page's project, session and type filters (not its query).
        return _EventStream(
            event_stream(hub, queue, last_id, filters),
            release=lambda: hub.unsubscribe(queue),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def stats_partial(request: Request) -> Response:
        project = no_nul(request.query_params.get("project", ""), "project") or None
        return HTMLResponse(pages.stats(await _stats(deps, cost), project))

    async def api_items(request: Request) -> Response:
        limit = _limit(request)
        return _json(await find_rows(deps.store, read_filters(request.query_params), limit))

    async def api_sessions(request: Request) -> Response:
        project = no_nul(request.query_params.get("project", ""), "project") or None
        return _json(await deps.store.sessions(project=project, limit=_limit(request)))

    async def api_session(request: Request) -> Response:
        return _json(await deps.store.timeline(_session_id(request)))

    async def api_stats(request: Request) -> Response:
        return _json(await _stats(deps, cost))

    routes = [
        Route("/", index),
        Route("/sessions/{sid:path}", session),  # a session id may hold "/"
        Route("/events", events),
        Route("/partials/stats", stats_partial),
        Route("/api/items", api_items),
        Route("/api/search", api_items),
        Route("/api/sessions", api_sessions),
        Route("/api/sessions/{sid:path}", api_session),
        Route("/api/stats", api_stats),
        Mount("/static", StaticFiles(packages=[("worker.fanout.ui", "static")]), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={BadFilterError: _bad_filter, SearchTimeoutError: _search_timeout},
    )
    app.state.hub = hub
    app.add_middleware(Guard, token=deps.token)
    return app


class _EventStream(StreamingResponse):
    """An event stream that frees its slot however it ends, even before its first event."""

    def __init__(self, *args: Any, release: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


def _session_id(request: Request) -> str:
    # The `path` converter also matches "": `/sessions/` is no session's page.
    sid = no_nul(request.path_params["sid"], "session id")
    if not sid:
        raise HTTPException(404)
    return sid


async def _search_timeout(request: Request, exc: Exception) -> Response:
    # One line, like the CLI's and MCP's: the search was stopped at MEMQ_SEARCH_TIMEOUT_S.
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": str(exc)}, 503)
    return PlainTextResponse(f"{exc}\n", 503)


async def _bad_filter(request: Request, exc: Exception) -> Response:
    if request.url.path.startswith(("/api/", "/events")):
        return JSONResponse({"error": str(exc)}, 400)
    return PlainTextResponse(str(exc), 400)


async def _stats(deps: UiDeps, cost: CostReader) -> dict[str, Any]:
    found = await collect_stats(deps.redis, deps.keys, deps.store, cost=cost)
    stats = msgspec.to_builtins(found)
    assert isinstance(stats, dict)
    return stats


def _limit(request: Request) -> int:
    try:
        return max(1, min(500, int(request.query_params.get("limit", _LIST_LIMIT))))
    except ValueError:
        return _LIST_LIMIT


def _json(data: object) -> Response:
    return Response(msgspec.json.encode(data), media_type="application/json")
