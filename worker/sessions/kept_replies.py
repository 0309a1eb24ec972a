"""Settled turns whose commit failed, kept in Redis until a retry commits them.

An observer reply is paid for: when storage fails (a malformed database, a full disk) the
retry must commit the same rows, not ask the observer again.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import cast

import msgspec
from redis.asyncio import Redis

from pipeline.turns.settle import Settled
from worker.keys import Keys

KEPT_TTL_S = 24 * 3600  # as long as the turn's attempt count


class Kept(msgspec.Struct, frozen=True, kw_only=True):
    """One settled turn and the events it settles (the retry's turn must be the same)."""

    event_ids: list[str]
    settled: Settled


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Kept)


class KeptReplies:
    """The kept turns of one session."""

    def __init__(self, redis: Redis, keys: Keys, session: str) -> None:
        self._redis = redis
        self.key = keys.kept(session)

    async def keep(self, first_entry: str, event_ids: list[str], settled: Settled) -> None:
        """Keep a settled turn under its first entry's id."""
        pipe = self._redis.pipeline(transaction=False)
        value = _ENCODER.encode(Kept(event_ids=event_ids, settled=settled))
        pipe.hset(self.key, mapping={first_entry: value})
        pipe.expire(self.key, KEPT_TTL_S)
        await pipe.execute()

    async def load(self, first_entry: str) -> Kept | None:
        """The turn kept under this entry id, or None (also for an unreadable one)."""
        raw = await cast(Awaitable[bytes | None], self._redis.hget(self.key, first_entry))
        if raw is None:
            return None
        try:
            return _DECODER.decode(raw)
        except msgspec.DecodeError:  # another version's layout: asking again is the fallback
            return None


def kept_prefix(kept: Kept | None, event_ids: list[str]) -> int:
    """How many of these events the kept turn settles when they start with its events, else 0:
    the retry's turn is cut to them, so it is the kept turn exactly."""
    if kept is None or event_ids[: len(kept.event_ids)] != kept.event_ids:
        return 0
    return len(kept.event_ids)
