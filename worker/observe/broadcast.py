"""Announce stored rows after commit: PUBLISH on the channel, XADD to the capped feed."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from worker.connect.lua import LuaScript
from worker.keys import Keys
from worker.storage.protocol import WriteStore
from worker.storage.records import StoredRow

_ENCODER = msgspec.json.Encoder()

# One call a turn instead of an XADD and a PUBLISH per row (each a command to pack and parse).
# KEYS: feed   ARGV: channel, maxlen, then (payload, kind, id)*
_ANNOUNCE = LuaScript("""
for i = 3, #ARGV, 3 do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*',
             'payload', ARGV[i], 'kind', ARGV[i + 1], 'id', ARGV[i + 2])
  redis.call('PUBLISH', ARGV[1], ARGV[i])
end
return (#ARGV - 2) / 3
""")


def payload(row: StoredRow) -> bytes:
    """The JSON payload of one stored row, the same on pub/sub and in the feed."""
    return _ENCODER.encode(row)


class Broadcaster:
    """Announces each stored row exactly once per success, then marks it announced."""

    def __init__(self, redis: Redis, keys: Keys, store: WriteStore, feed_maxlen: int) -> None:
        self.redis = redis
        self.keys = keys
        self.store = store
        self.feed_maxlen = feed_maxlen

    async def announce(self, rows: Sequence[StoredRow]) -> None:
        """Publish and append rows (in order), then record them as announced."""
        if not rows:
            return
        pipe = self.redis.pipeline(transaction=False)
        self.queue(pipe, rows)
        await pipe.execute()
        await self.store.mark_announced(rows)

    def queue(self, pipe: Pipeline, rows: Sequence[StoredRow]) -> None:
        """Add the XADD and PUBLISH of each row to a pipeline; `mark_announced` once it ran."""
        if not rows:
            return
        args: list[str | int | bytes] = [self.keys.observations, self.feed_maxlen]
        for row in rows:
            args += [payload(row), row.kind, row.id]
        _ANNOUNCE.queue(pipe, [self.keys.feed], args)

    async def announce_backlog(self, limit: int = 500, *, session: str | None = None) -> int:
        """Announce rows a crash left unannounced (of one session); returns how many."""
        rows = await self.store.unannounced(limit, memory_session_id=session)
        await self.announce(rows)
        return len(rows)
