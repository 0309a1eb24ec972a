"""One entry of the feed stream as its readers see it: the announced row and its payload."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from redis.asyncio import Redis

from worker.keys import Keys
from worker.redis_text import as_text
from worker.storage.records import StoredRow

_ROW = msgspec.json.Decoder(StoredRow)


class FeedItem(msgspec.Struct, frozen=True, kw_only=True):
    """One feed entry: its stream id, the announced row and the payload as announced."""

    feed_id: str
    row: StoredRow
    payload: bytes

    @property
    def key(self) -> str:
        """The row's identity (`kind:id`), the same however often it was announced."""
        return f"{self.row.kind}:{self.row.id}"


Handler = Callable[[FeedItem], Awaitable[None]]


def parse_feed_id(feed_id: str) -> tuple[int, int]:
    """`"1700000000000-3"` as `(1700000000000, 3)`; ValueError when it is not a stream id."""
    ms, _, seq = feed_id.partition("-")
    if not ms.isdigit() or not seq.isdigit():
        raise ValueError(f"not a stream id: {feed_id!r}")
    return int(ms), int(seq)


async def newest_feed_id(redis: Redis, keys: Keys) -> str | None:
    """The id of the feed's newest entry; None while the feed is empty."""
    newest = await redis.xrevrange(keys.feed, count=1)
    return as_text(newest[0][0]) if newest else None


def decode_entry(feed_id: str, fields: dict[Any, Any]) -> FeedItem:
    """A raw feed entry as a FeedItem; msgspec.DecodeError or KeyError when malformed."""
    raw = fields.get(b"payload", fields.get("payload"))
    if raw is None:
        raise KeyError("payload")
    payload = raw if isinstance(raw, bytes) else str(raw).encode()
    return FeedItem(feed_id=feed_id, row=_ROW.decode(payload), payload=payload)
