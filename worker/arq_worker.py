"""memq's arq Worker: it rides out a short Redis outage and still shuts down without Redis."""

from __future__ import annotations

import logging
import time

from arq import Worker
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

SHUT_DOWN = "shut_down"
"""Set in the job context once the shutdown hook ran."""

RIDE_OUT_S = 8.0
"""How long the poll loop keeps going while Redis is unreachable; then the worker exits and
its supervisor restarts it (each attempt itself retries connecting for ~7.5 s)."""

_LOST = (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError)


class MemqWorker(Worker):
    """arq's Worker, surviving a command cut off by a Redis restart and closing without Redis.

    arq lets any Redis error of its poll loop end the process: a command in flight while Redis
    restarted (not retried, since it may have run) killed a worker that a reconnect would save.
    """

    _outage_since: float | None = None

    async def _poll_iteration(self) -> None:
        try:
            await super()._poll_iteration()
        except _LOST as e:
            now = time.monotonic()
            if self._outage_since is None:
                self._outage_since = now
            if now - self._outage_since > RIDE_OUT_S:
                logger.error("Redis unreachable for %.0f s, giving up: %s", RIDE_OUT_S, e)
                raise
            logger.warning("lost Redis, polling again: %s", e)
            return
        self._outage_since = None

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's start_jobs one id at a time, giving back the slot a cut-off start held."""
        for job_id in job_ids:
            try:
                await super().start_jobs([job_id])
            except _LOST:
                # arq took a slot before its Redis round trip and only gives it back on success.
                if job_id.decode() not in self.tasks:
                    self.job_counter -= 1
                    self.sem.release()
                raise

    async def close(self) -> None:
        """Close as arq does; without Redis, still close the runtime, then re-raise.

        arq's close() waits for the job tasks and deletes its health key before on_shutdown:
        with Redis down either step raised first, the store's connection thread stayed open and
        the process never exited, so no supervisor ever restarted it.
        """
        try:
            await super().close()
        except (RedisError, OSError) as e:
            logger.error("worker closing without Redis: %s", e)
            if self.on_shutdown is not None and not self.ctx.get(SHUT_DOWN):
                await self.on_shutdown(self.ctx)
            raise
