"""The announce outbox: stored rows wait in storage (unannounced) until announced, once."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

from redis.asyncio import Redis

from worker.keys import Keys
from worker.observe.broadcast import queue_announce
from worker.storage.protocol import Store

if TYPE_CHECKING:
    from worker.telemetry.metrics import Metrics

logger = logging.getLogger(__name__)

Late = Literal["startup", "session"]
"""Who found rows whose commit's announce never ran: a starting worker, the session's job."""


class Outbox:
    """The one way stored rows are announced: read the unannounced, announce, mark them.

    Every writer flushes after its commit; a crash in between leaves the rows in the outbox
    for the session's next job or a starting worker. Marked only after Redis took them, so a
    row may be announced twice (the feed dedupes by identity), never lost.
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

    async def flush(self, session: str | None = None, *, late: Late | None = None) -> int:
        """Announce every unannounced row (of one session), oldest first; returns how many.

        `late` says the rows were left by a failure: they are counted and logged as such.
        """
        total = 0
        while rows := await self.store.unannounced(self.batch_rows, memory_session_id=session):
            pipe = self.redis.pipeline(transaction=False)
            queue_announce(pipe, self.keys, self.feed_maxlen, rows)
            await pipe.execute()
            await self.store.mark_announced(rows)
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
