"""The announce outbox: stored rows wait in storage (unannounced) until announced on Redis."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import msgspec
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from worker.connect.lua import LuaScript
from worker.keys import Keys
from worker.storage.protocol import Store
from worker.storage.records import StoredRow

if TYPE_CHECKING:
    from worker.telemetry.metrics import Metrics

logger = logging.getLogger(__name__)

_ENCODER = msgspec.json.Encoder()

# One call a batch instead of an XADD and a PUBLISH per row (each a command to pack and parse).
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


Late = Literal["startup", "session"]
"""Who found rows whose commit's announce never ran: a starting worker, the session's job."""


class Outbox:
    """The one way stored rows leave storage's outbox: announced on Redis, then marked.

    A commit announces the rows it wrote in its own round trip (`queue`, then `sent`); rows a
    failure left behind go out with `flush`, from the session's next job or a starting worker.
    Marked only after Redis took them: a row may go out twice (the feed dedupes), never lost.
    """

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        store: Store,
        feed_maxlen: int,
        metrics: Metrics | None = None,
        batch_rows: int = 500,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.store = store
        self.feed_maxlen = feed_maxlen
        self.metrics = metrics
        self.batch_rows = batch_rows

    def queue(self, pipe: Pipeline, rows: Sequence[StoredRow]) -> None:
        """Announce rows in a round trip the caller runs (PUBLISH on the channel, XADD to the
        capped feed, in order); call `sent` once it ran."""
        if not rows:
            return
        args: list[str | int | bytes] = [self.keys.observations, self.feed_maxlen]
        for row in rows:
            args += [payload(row), row.kind, row.id]
        _ANNOUNCE.queue(pipe, [self.keys.feed], args)

    async def sent(self, rows: Sequence[StoredRow]) -> None:
        """Take announced rows out of the outbox."""
        if rows:
            await self.store.mark_announced(rows)

    async def flush(self, session: str | None = None, *, late: Late | None = None) -> int:
        """Announce every row still in the outbox (of one session), oldest first; how many.

        `late` says the rows were left by a failure: they are counted and logged as such.
        """
        total = 0
        while rows := await self.store.unannounced(self.batch_rows, memory_session_id=session):
            pipe = self.redis.pipeline(transaction=False)
            self.queue(pipe, rows)
            await pipe.execute()
            await self.sent(rows)
            total += len(rows)
            if len(rows) < self.batch_rows:
                break
        if total and late is not None:
            if self.metrics is not None:
                self.metrics.count_recovered(late, total)
            logger.info(
                "announced %d rows stored before a failure (found by %s)",
                total,
                late,
                extra={"session_id": session} if session else None,
            )
        return total
