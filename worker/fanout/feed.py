"""Follow the feed for a fan-out service: pub/sub for latency, the feed stream for resume."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.backoff import Backoff
from worker.fanout.feed_items import (
    FeedItem,
    Handler,
    decode_entry,
    newest_feed_id,
    parse_feed_id,
)
from worker.keys import Keys
from worker.redis_text import as_text

logger = logging.getLogger(__name__)

_ORIGIN = "0-0"
_PERSIST_GIVE_UP_S = 10.0
RETRY_BACKOFF = Backoff(base_s=0.5, max_s=30.0, jitter=False)
"""A failing handler or a lost subscription: half a second doubling to 30 s."""


@dataclass(slots=True)
class ConsumerStats:
    """What one consumer did since it started."""

    delivered: int = 0
    duplicates: int = 0
    failed: int = 0
    malformed: int = 0
    gaps: int = 0


class FanoutConsumer:
    """Delivers each row of `<prefix>:feed` once to `handler`, in feed order.

    Pub/sub on `<prefix>:observations` only wakes the reader; the feed is the source, so a
    missed message or a disconnect loses nothing. A named consumer keeps its cursor and the
    rows it delivered lately in Redis, written only after the handler returned (and finished
    even if the task is cancelled then), so a restart neither repeats nor skips a row. Rows
    announced twice (a worker re-announcing after a crash) are delivered once. An unnamed
    consumer keeps its position in memory and starts at the feed's end.
    """

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        handler: Handler,
        *,
        name: str | None,
        start: Literal["end", "beginning"] = "end",
        batch: int = 100,
        poll_interval_s: float = 1.0,
        seen_max: int = 10_000,
        max_attempts: int = 5,
        backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.handler = handler
        self.name = name
        self.start = start
        self.batch = batch
        self.poll_interval_s = poll_interval_s
        self.seen_max = seen_max
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.stats = ConsumerStats()
        self._cursor: str | None = None
        self._seen: dict[str, None] = {}  # insertion-ordered: the oldest is forgotten first
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._ready = asyncio.Event()

    @property
    def cursor(self) -> str | None:
        """The feed id of the last row handled (or skipped), None before the first read."""
        return self._cursor

    async def wait_ready(self) -> None:
        """Return once the consumer knows where it starts (for tests and the UI)."""
        await self._ready.wait()

    def stop(self) -> None:
        """Finish the row in hand, then make `run` return."""
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Deliver rows until `stop()`; Redis errors are logged and retried, never raised."""
        listener = asyncio.create_task(self._listen())
        failures = 0
        try:
            while not self._stopping.is_set():
                try:
                    if self._cursor is None:
                        await self._load()
                    delivered = await self._pump()
                    failures = 0
                except (RedisError, OSError) as e:
                    failures += 1
                    logger.warning("feed read failed, retrying", extra=self._log(error=str(e)))
                    await self._sleep(self._backoff(failures))
                    continue
                if not delivered:
                    await self._idle()
        except _Stopped:
            pass
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)

    async def _load(self) -> None:
        cursor: str | None = None
        if self.name is not None:
            stored = await self.redis.get(self.keys.fanout_cursor(self.name))
            cursor = None if stored is None else as_text(stored)
            seen = await self.redis.zrange(self.keys.fanout_seen(self.name), 0, -1)
            self._seen = dict.fromkeys(as_text(k) for k in seen)
        if cursor is None:
            cursor = await self._start_cursor()
            if self.name is not None:
                # Saved at once: rows announced before the first delivery are not skipped later.
                await self.redis.set(self.keys.fanout_cursor(self.name), cursor, nx=True)
        else:
            await self._check_gap(cursor)
        self._cursor = cursor
        self._ready.set()

    async def _start_cursor(self) -> str:
        if self.start == "beginning":
            return _ORIGIN
        return await newest_feed_id(self.redis, self.keys) or _ORIGIN

    async def _check_gap(self, cursor: str) -> None:
        # The feed is trimmed from its head: while the cursor's own entry is there, nothing
        # after it is gone. (XTRIM does not update XINFO's max-deleted-entry-id.)
        if cursor == _ORIGIN or await self.redis.xrange(self.keys.feed, cursor, cursor):
            return
        first = await self.redis.xrange(self.keys.feed, count=1)
        if first and parse_feed_id(as_text(first[0][0])) > parse_feed_id(cursor):
            self.stats.gaps += 1
            logger.error(
                "the feed was trimmed past this consumer's cursor: rows after it may never"
                " have been delivered (raise MEMQ_FEED_MAXLEN or restart the consumer sooner)",
                extra=self._log(cursor=cursor, first_kept=as_text(first[0][0])),
            )

    async def _pump(self) -> int:
        assert self._cursor is not None
        self._wake.clear()  # before the read: a message arriving during it wakes the next wait
        found = await self.redis.xread({self.keys.feed: self._cursor}, count=self.batch)
        if not found:
            return 0
        entries = found[0][1]
        for raw_id, fields in entries:
            if self._stopping.is_set():
                break
            await self._deliver(as_text(raw_id), fields)
        return len(entries)

    async def _deliver(self, feed_id: str, fields: dict[Any, Any]) -> None:
        try:
            item = decode_entry(feed_id, fields)
        except (msgspec.DecodeError, KeyError) as e:
            self.stats.malformed += 1
            logger.error("malformed feed entry skipped", extra=self._log(feed_id=feed_id, error=e))
            self._cursor = feed_id
            return
        if item.key in self._seen:
            self.stats.duplicates += 1
            self._cursor = feed_id
            return
        outcome = await self._handle(item)
        await self._commit(item, outcome)

    async def _handle(self, item: FeedItem) -> str:
        for attempt in range(1, self.max_attempts + 1):
            try:
                await self.handler(item)
                return "delivered"
            except Exception as e:
                logger.warning(
                    "fan-out handler failed",
                    extra=self._log(row=item.key, attempt=attempt, error=repr(e)),
                )
                if attempt < self.max_attempts:
                    await self._sleep(self._backoff(attempt))
        self.stats.failed += 1
        logger.error(
            "fan-out handler gave up on a row: not delivered",
            extra=self._log(row=item.key, attempts=self.max_attempts),
        )
        return "failed"

    async def _commit(self, item: FeedItem, outcome: str) -> None:
        self._cursor = item.feed_id
        self._seen[item.key] = None
        while len(self._seen) > self.seen_max:
            del self._seen[next(iter(self._seen))]
        if outcome == "delivered":
            self.stats.delivered += 1
        if self.name is None:
            return
        write = asyncio.ensure_future(self._persist(item, outcome))
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:
            # The handler already acted: the cursor must be saved before the task ends.
            await write
            raise

    async def _persist(self, item: FeedItem, outcome: str) -> None:
        assert self.name is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _PERSIST_GIVE_UP_S
        attempt = 0
        while True:
            try:
                pipe = self.redis.pipeline(transaction=True)
                pipe.set(self.keys.fanout_cursor(self.name), item.feed_id)
                pipe.zadd(
                    self.keys.fanout_seen(self.name), {item.key: parse_feed_id(item.feed_id)[0]}
                )
                pipe.zremrangebyrank(self.keys.fanout_seen(self.name), 0, -self.seen_max - 1)
                pipe.hincrby(self.keys.fanout_stats(self.name), outcome, 1)
                await pipe.execute()
                return
            except (RedisError, OSError) as e:
                attempt += 1
                if loop.time() > deadline:
                    logger.error(
                        "cursor not saved: this row may be delivered again after a restart",
                        extra=self._log(row=item.key, error=str(e)),
                    )
                    return
                await asyncio.sleep(min(self._backoff(attempt), 1.0))

    async def _listen(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(self.keys.observations)
                    failures = 0
                    self._wake.set()  # catch up on rows announced while unsubscribed
                    while not self._stopping.is_set():
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=1.0
                        )
                        if message is not None:
                            self._wake.set()
            except (RedisError, OSError) as e:
                failures += 1
                logger.debug("pub/sub lost, resubscribing", extra=self._log(error=str(e)))
                await asyncio.sleep(self._backoff(failures))

    async def _idle(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self.poll_interval_s)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
        if self._stopping.is_set():
            raise _Stopped

    def _backoff(self, attempt: int) -> float:
        return self.backoff.delay_s(attempt)

    def _log(self, **fields: object) -> dict[str, object]:
        return {"consumer": self.name or "(live)", **fields}


class _Stopped(Exception):
    """Raised inside `run` when stop() interrupts a wait."""
