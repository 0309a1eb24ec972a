"""The live feed as Server-Sent Events: one shared reader, replay after Last-Event-ID, filters."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from redis.asyncio import Redis

from worker.fanout.feed import FanoutConsumer, FeedItem, decode_entry, parse_feed_id
from worker.fanout.ui.filters import Filters, matches
from worker.keys import Keys
from worker.storage.records import StoredRow

KEEPALIVE_S = 15.0
_QUEUE_SIZE = 1000
_BACKLOG_PAGE = 500
_CLOSED = object()  # tells a stream its subscriber queue overflowed
_PAYLOAD = msgspec.json.Decoder(dict[str, Any])

RenderCard = Callable[[StoredRow], str]


@dataclass(frozen=True, slots=True)
class LiveRow:
    """A feed entry read live, with its event rendered once for every open stream."""

    item: FeedItem
    message: str


def sse_message(item: FeedItem, html: str) -> str:
    """One Server-Sent Event: the feed id, the kind, the payload as announced plus its card.

    The card (`"html"`) is an extra field, so a consumer reading the payload keeps working.
    """
    data = _PAYLOAD.decode(item.payload)
    data["html"] = html
    body = msgspec.json.encode(data).decode()
    return f"id: {item.feed_id}\nevent: {item.row.kind}\ndata: {body}\n\n"


class FeedHub:
    """One live reader of the feed shared by every open event stream of this process."""

    def __init__(self, redis: Redis, keys: Keys, render: RenderCard) -> None:
        self.redis = redis
        self.keys = keys
        self.render = render
        self.consumer = FanoutConsumer(redis, keys, self._fan_out, name=None)
        self._queues: set[asyncio.Queue[object]] = set()

    def message(self, item: FeedItem) -> str:
        """The event for `item`, its card rendered by the server."""
        return sse_message(item, self.render(item.row))

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
        if not self._queues:
            return  # nobody to render for
        live = LiveRow(item, self.message(item))
        for queue in list(self._queues):
            try:
                queue.put_nowait(live)
            except asyncio.QueueFull:
                self._close(queue)  # a stalled client; it reconnects with Last-Event-ID


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


async def event_stream(hub: FeedHub, last_id: str | None, filters: Filters) -> AsyncIterator[str]:
    """Replay the feed after `last_id`, then follow it live; each row once, in feed order.

    Only rows passing `filters` are sent: the browser inserts what comes, it filters nothing.
    """
    queue = hub.subscribe()  # before the replay: nothing falls between the two
    try:
        yield "retry: 2000\n\n"
        last = parse_feed_id(last_id) if last_id else None
        if last_id:
            async for item in feed_after(hub.redis, hub.keys, last_id):
                last = parse_feed_id(item.feed_id)
                if matches(item.row, filters):
                    yield hub.message(item)
        while True:
            try:
                got = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            if not isinstance(got, LiveRow):
                return
            position = parse_feed_id(got.item.feed_id)
            if last is not None and position <= last:
                continue
            last = position
            if matches(got.item.row, filters):
                yield got.message
    finally:
        hub.unsubscribe(queue)
