"""The live feed as Server-Sent Events: one shared reader, bounded replay, a cap on streams."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import msgspec
from redis.asyncio import Redis

from worker.errors import WorkerError
from worker.fanout.feed import FanoutConsumer
from worker.fanout.feed_items import FeedItem, decode_entry, newest_feed_id, parse_feed_id
from worker.fanout.ui.filters import Filters, matches
from worker.keys import Keys
from worker.redis_text import as_text
from worker.storage.records import StoredRow

KEEPALIVE_S = 15.0
REPLAY_MAX = 1000  # feed entries one reconnect may replay; past it, a `reset` event
_QUEUE_SIZE = 1000
_BACKLOG_PAGE = 250
_CLOSED = object()  # tells a stream its subscriber queue overflowed
_STREAM_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")  # ASCII only: str.isdigit() takes other scripts
_U64_MAX = 2**64 - 1


class TooManyStreamsError(WorkerError):
    """Every event stream slot of this UI process is taken."""


def is_stream_id(value: str) -> bool:
    """True for a Redis stream id Redis accepts (`ms-seq`, each part a 64-bit unsigned int)."""
    if not _STREAM_ID.fullmatch(value):
        return False
    ms, seq = parse_feed_id(value)
    return ms <= _U64_MAX and seq <= _U64_MAX


RenderCard = Callable[[StoredRow], str]


@dataclass(frozen=True, slots=True)
class LiveRow:
    """A feed entry read live, with its event rendered once for every open stream."""

    item: FeedItem
    message: str


def sse_message(item: FeedItem, html: str) -> str:
    """One Server-Sent Event: the feed id, the kind, the row's fields plus its card.

    `data` is encoded afresh from the decoded row, never the stored bytes: unknown fields and
    the payload's own encoding stay out. The card (`"html"`) is an extra field.
    """
    data = msgspec.structs.asdict(item.row)
    data["html"] = html
    body = msgspec.json.encode(data).decode()
    return f"id: {item.feed_id}\nevent: {item.row.kind}\ndata: {body}\n\n"


def reset_message(feed_id: str, skipped_after: str) -> str:
    """The event saying a replay stopped short: rows after `skipped_after` were not sent."""
    reason = f"more than {REPLAY_MAX} feed entries since {skipped_after}: reload the page"
    body = msgspec.json.encode({"reason": reason}).decode()
    return f"id: {feed_id}\nevent: reset\ndata: {body}\n\n"


class FeedHub:
    """One live reader of the feed shared by every open event stream of this process."""

    def __init__(self, redis: Redis, keys: Keys, render: RenderCard, max_streams: int) -> None:
        self.redis = redis
        self.keys = keys
        self.render = render
        self.max_streams = max_streams
        self.consumer = FanoutConsumer(redis, keys, self._fan_out, name=None)
        self._queues: set[asyncio.Queue[object]] = set()

    def message(self, item: FeedItem) -> str:
        """The event for `item`, its card rendered by the server."""
        return sse_message(item, self.render(item.row))

    def subscribe(self) -> asyncio.Queue[object]:
        """A queue receiving every row read from now on; TooManyStreamsError when all are taken."""
        if len(self._queues) >= self.max_streams:
            raise TooManyStreamsError(
                f"all {self.max_streams} event streams are open (MEMQ_UI_MAX_STREAMS): retry later"
            )
        queue: asyncio.Queue[object] = asyncio.Queue(_QUEUE_SIZE)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[object]) -> None:
        """Stop feeding a queue and free its slot (again is harmless)."""
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


async def feed_after(
    redis: Redis, keys: Keys, last_id: str, limit: int = REPLAY_MAX
) -> AsyncIterator[FeedItem | None]:
    """Feed entries after `last_id`, oldest first (malformed ones skipped), at most `limit`.

    Yields None last when more entries than `limit` follow `last_id` (the rest is not read).
    """
    start, read = f"({last_id}", 0
    while read < limit:
        wanted = min(_BACKLOG_PAGE, limit - read)
        page = await redis.xrange(keys.feed, min=start, count=wanted)
        for raw_id, fields in page:
            feed_id = as_text(raw_id)
            start, read = f"({feed_id}", read + 1
            try:
                yield decode_entry(feed_id, fields)
            except (msgspec.DecodeError, KeyError):
                continue
        if len(page) < wanted:
            return
    if await redis.xrange(keys.feed, min=start, count=1):
        yield None


async def event_stream(
    hub: FeedHub, queue: asyncio.Queue[object], last_id: str | None, filters: Filters
) -> AsyncIterator[str]:
    """Replay the feed after `last_id`, then follow it live; each row once, in feed order.

    `queue` is this stream's subscription, taken before the replay so nothing falls between.
    Only rows passing `filters` are sent: the browser inserts what comes, it filters nothing.
    A replay longer than REPLAY_MAX stops with a `reset` event, whose id is the feed's end;
    an id past the feed's end (a flushed Redis, a made-up id) starts from now.
    """
    try:
        yield "retry: 2000\n\n"
        last: tuple[int, int] | None = None
        newest = await newest_feed_id(hub.redis, hub.keys) if last_id else None
        if last_id and newest and parse_feed_id(last_id) <= parse_feed_id(newest):
            last = parse_feed_id(last_id)
            async for item in feed_after(hub.redis, hub.keys, last_id):
                if item is None:
                    last = parse_feed_id(newest)  # later rows come through the queue
                    yield reset_message(newest, last_id)
                    break
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
