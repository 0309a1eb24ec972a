"""`memq ui`: a Starlette app with the live feed (SSE), filters, search, sessions and stats."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import msgspec
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pipeline.events import Identifier
from worker.errors import ConfigError
from worker.fanout.feed import FanoutConsumer, FeedItem, decode_entry, parse_feed_id
from worker.fanout.ui.assets import APP_CSS, APP_JS
from worker.fanout.ui.auth import Guard, is_loopback
from worker.fanout.ui.page import Filters, TypeLabel, index_page, session_page
from worker.keys import Keys
from worker.ops.stats import collect_stats
from worker.search.hybrid import BadQueryError, match_expression
from worker.storage.index_records import TextFilter
from worker.storage.protocol import Store
from worker.storage.records import StoredRow

logger = logging.getLogger(__name__)

KEEPALIVE_S = 15.0
_QUEUE_SIZE = 1000
_BACKLOG_PAGE = 500
_LIST_LIMIT = 100
_READY_TIMEOUT_S = 5.0
_CLOSED = object()  # tells a stream its subscriber queue overflowed


def check_bind(host: str, token: str | None) -> None:
    """ConfigError when the UI would listen beyond loopback without MEMQ_UI_TOKEN."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve the UI on {host} without MEMQ_UI_TOKEN: set a token,"
            " or bind 127.0.0.1"
        )


@dataclass(frozen=True, slots=True)
class UiDeps:
    """What the app reads from: Redis (feed, stats) and the store; the mode's type labels."""

    redis: Redis
    keys: Keys
    store: Store
    types: dict[str, TypeLabel]
    token: str | None = None


class FeedHub:
    """One live reader of the feed shared by every open event stream of this process."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.consumer = FanoutConsumer(redis, keys, self._fan_out, name=None)
        self._queues: set[asyncio.Queue[object]] = set()

    def subscribe(self) -> asyncio.Queue[object]:
        """A queue receiving every row read from now on."""
        queue: asyncio.Queue[object] = asyncio.Queue(_QUEUE_SIZE)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[object]) -> None:
        """Stop feeding a queue."""
        self._queues.discard(queue)

    def close_streams(self) -> None:
        """End every open event stream (at shutdown); clients reconnect with Last-Event-ID."""
        for queue in list(self._queues):
            self._close(queue)

    def _close(self, queue: asyncio.Queue[object]) -> None:
        self._queues.discard(queue)
        with contextlib.suppress(asyncio.QueueEmpty):
            while queue.full():
                queue.get_nowait()
        queue.put_nowait(_CLOSED)

    async def _fan_out(self, item: FeedItem) -> None:
        for queue in list(self._queues):
            try:
                queue.put_nowait(item)
            except asyncio.QueueFull:
                self._close(queue)  # a stalled client; it reconnects with Last-Event-ID


def sse_message(item: FeedItem) -> str:
    """One Server-Sent Event: the feed id, the kind, the payload as announced."""
    return f"id: {item.feed_id}\nevent: {item.row.kind}\ndata: {item.payload.decode()}\n\n"


async def feed_after(redis: Redis, keys: Keys, last_id: str) -> AsyncIterator[FeedItem]:
    """Feed entries after `last_id`, oldest first (malformed entries skipped)."""
    start = f"({last_id}"
    while True:
        page = await redis.xrange(keys.feed, min=start, count=_BACKLOG_PAGE)
        for raw_id, fields in page:
            feed_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            start = f"({feed_id}"
            try:
                yield decode_entry(feed_id, fields)
            except (msgspec.DecodeError, KeyError):
                continue
        if len(page) < _BACKLOG_PAGE:
            return


def is_session_id(value: str) -> bool:
    """True when `value` is a session id as events carry them (so a filter can match)."""
    try:
        msgspec.convert(value, Identifier)
    except msgspec.ValidationError:
        return False
    return True


async def event_stream(
    hub: FeedHub, redis: Redis, keys: Keys, last_id: str | None, session: str | None = None
) -> AsyncIterator[str]:
    """Replay the feed after `last_id`, then follow it live; each row once, in feed order.

    With `session`, only that session's rows are sent (a session page needs no others).
    """
    queue = hub.subscribe()  # before the replay: nothing falls between the two
    try:
        yield "retry: 2000\n\n"
        last = parse_feed_id(last_id) if last_id else None
        if last_id:
            async for item in feed_after(redis, keys, last_id):
                last = parse_feed_id(item.feed_id)
                if session is None or item.row.memory_session_id == session:
                    yield sse_message(item)
        while True:
            try:
                got = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            if not isinstance(got, FeedItem):
                return
            position = parse_feed_id(got.feed_id)
            if last is not None and position <= last:
                continue
            last = position
            if session is None or got.row.memory_session_id == session:
                yield sse_message(got)
    finally:
        hub.unsubscribe(queue)


def build_app(deps: UiDeps) -> Starlette:
    """The ASGI app; its lifespan runs the feed reader."""
    hub = FeedHub(deps.redis, deps.keys)

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
        filters = _filters(request)
        last = await deps.redis.xrevrange(deps.keys.feed, count=1)  # before the rows
        rows = await find_rows(deps.store, filters, _LIST_LIMIT)
        html = index_page(
            rows,
            filters=filters,
            types=deps.types,
            sessions=await deps.store.sessions(limit=200),
            stats=await _stats(deps),
            last_event_id=_text(last[0][0]) if last else "",
        )
        return HTMLResponse(html)

    async def session(request: Request) -> Response:
        sid = request.path_params["sid"]
        last = await deps.redis.xrevrange(deps.keys.feed, count=1)  # before the rows
        entries = await deps.store.timeline(sid)
        # An id no event could carry gets no server-side filter; the script still filters.
        query = urlencode({"session": sid}) if is_session_id(sid) else ""
        html = session_page(
            sid,
            entries,
            deps.types,
            last_event_id=_text(last[0][0]) if last else "",
            events_url=f"/events?{query}" if query else "/events",
        )
        return HTMLResponse(html)

    async def events(request: Request) -> Response:
        last_id = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        if last_id:
            try:
                parse_feed_id(last_id)
            except ValueError:
                return JSONResponse({"error": "Last-Event-ID is not a feed id"}, 400)
        only = request.query_params.get("session")
        if only is not None and not is_session_id(only):
            return JSONResponse({"error": "session is not a session id"}, 400)
        return StreamingResponse(
            event_stream(hub, deps.redis, deps.keys, last_id, only),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def api_items(request: Request) -> Response:
        limit = _limit(request)
        return _json(await find_rows(deps.store, _filters(request), limit))

    async def api_sessions(request: Request) -> Response:
        project = request.query_params.get("project") or None
        return _json(await deps.store.sessions(project=project, limit=_limit(request)))

    async def api_session(request: Request) -> Response:
        return _json(await deps.store.timeline(request.path_params["sid"]))

    async def api_stats(request: Request) -> Response:
        return _json(await _stats(deps))

    routes = [
        Route("/", index),
        Route("/sessions/{sid:str}", session),
        Route("/events", events),
        Route("/api/items", api_items),
        Route("/api/search", api_items),
        Route("/api/sessions", api_sessions),
        Route("/api/sessions/{sid:str}", api_session),
        Route("/api/stats", api_stats),
        Route("/app.css", _asset(APP_CSS, "text/css")),
        Route("/app.js", _asset(APP_JS, "text/javascript")),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.hub = hub
    app.add_middleware(Guard, token=deps.token)
    return app


async def _stats(deps: UiDeps) -> dict[str, Any]:
    stats = msgspec.to_builtins(await collect_stats(deps.redis, deps.keys, deps.store))
    assert isinstance(stats, dict)
    return stats


async def find_rows(store: Store, filters: Filters, limit: int) -> list[StoredRow]:
    """Rows for the list: keyword search (FTS5) when `q` is set, else the newest; filtered."""
    if filters.q:
        try:
            match = match_expression(filters.q)
        except BadQueryError:
            return []
        text_filter = TextFilter(project=filters.project or None, type=filters.type or None)
        # A session filter is applied afterwards: search over a wider window for it.
        window = limit * 5 if filters.session else limit
        hits = await store.search_text(match, text_filter, window)
        rows = await store.rows_by_keys([(h.kind, h.id) for h in hits])
    else:
        rows = await store.observations(
            memory_session_id=filters.session or None,
            project=filters.project or None,
            limit=limit * 5 if filters.type else limit,
        )
    return [r for r in rows if _matches(r, filters)][:limit]


def _matches(row: StoredRow, filters: Filters) -> bool:
    kind = row.type if row.kind == "observation" else "summary"
    return (
        (not filters.session or row.memory_session_id == filters.session)
        and (not filters.project or row.project == filters.project)
        and (not filters.type or kind == filters.type)
    )


def _filters(request: Request) -> Filters:
    q = request.query_params
    return Filters(
        q=q.get("q", "").strip(),
        project=q.get("project", "").strip(),
        session=q.get("session", "").strip(),
        type=q.get("type", "").strip(),
    )


def _limit(request: Request) -> int:
    try:
        return max(1, min(500, int(request.query_params.get("limit", _LIST_LIMIT))))
    except ValueError:
        return _LIST_LIMIT


def _json(data: object) -> Response:
    return Response(msgspec.json.encode(data), media_type="application/json")


def _asset(text: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    body = text.encode()

    async def serve(request: Request) -> Response:
        return Response(body, media_type=f"{media_type}; charset=utf-8")

    return serve


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
