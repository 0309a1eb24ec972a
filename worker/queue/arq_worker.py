"""memq's arq Worker: it rides out a short Redis outage and still shuts down without Redis."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.queue.arq_start_jobs import LuaStartWorker

logger = logging.getLogger(__name__)

SHUT_DOWN = "shut_down"
"""Set in the job context once the shutdown hook ran."""

RIDE_OUT_S = 8.0
"""How long the worker keeps restarting its poll loop while Redis is unreachable; then it exits
and its supervisor restarts it (each attempt itself retries connecting for ~7.5 s)."""
RECONNECT_S = 7.5
"""The pool's own reconnect window (`arq_pool.RIDE_OUT_RETRIES`): a run that failed on a lost
Redis had been retrying that long, so the outage began that much earlier."""

_LOST = (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError)


class MemqWorker(LuaStartWorker):
    """arq's Worker, surviving a command cut off by a Redis restart and closing without Redis.

    arq lets any Redis error of its poll loop end `main()`: a command in flight while Redis
    restarted (not retried, since it may have run) killed a worker that a reconnect would save.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._started = False
        self._gave_up = False
        self._first_startup = self.on_startup
        self.on_startup = self._startup_once

    async def _startup_once(self, ctx: dict[Any, Any]) -> None:
        # main() runs on_startup each time it starts; the runtime is built once per process.
        if not self._started and self._first_startup is not None:
            await self._first_startup(ctx)
        self._started = True

    async def main(self) -> None:
        """arq's main(), started again after losing Redis while it comes back within RIDE_OUT_S.

        It runs in arq's main task, so a signal's cancellation stops the restarts too.
        """
        outage_since: float | None = None
        while True:
            began = time.monotonic()
            try:
                await super().main()
                return
            except _LOST as e:
                if not self._started:
                    raise  # no runtime yet: the startup itself failed
                now = time.monotonic()
                if outage_since is None or now - began > RIDE_OUT_S + RECONNECT_S:
                    # The last run went well for a while: a new outage, counted from when its
                    # reconnects began (else each restart's own retries stacked: ~30 s in all).
                    outage_since = max(began, now - RECONNECT_S)
                if now - outage_since > RIDE_OUT_S:
                    logger.error(
                        "Redis unreachable for %.0f s, giving up: %s", now - outage_since, e
                    )
                    self._gave_up = True
                    raise
                logger.warning("lost Redis, polling again: %s", e)
            await asyncio.sleep(self.poll_delay_s)

    async def close(self) -> None:
        """Close as arq does; without Redis, still close the runtime, then re-raise.

        arq's close() waits for the job tasks and deletes its health key before on_shutdown:
        with Redis down either step raised first, the store's connection thread stayed open and
        the process never exited, so no supervisor ever restarted it.
        """
        if self._gave_up:  # Redis is gone: closing must not retry reconnecting once more
            self.pool.set_retry(Retry(NoBackoff(), 0))
        try:
            await super().close()
        except (RedisError, OSError) as e:
            logger.error("worker closing without Redis: %s", e)
            if self.on_shutdown is not None and not self.ctx.get(SHUT_DOWN):
                await self.on_shutdown(self.ctx)
            raise
