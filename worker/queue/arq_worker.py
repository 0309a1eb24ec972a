"""memq's arq Worker: it rides out a short Redis outage and still shuts down without Redis."""

from __future__ import annotations

import logging
import time

from arq import Worker
from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.connect.lua import LuaScript

logger = logging.getLogger(__name__)

SHUT_DOWN = "shut_down"
"""Set in the job context once the shutdown hook ran."""

RIDE_OUT_S = 8.0
"""How long the poll loop keeps going while Redis is unreachable; then the worker exits and
its supervisor restarts it (each attempt itself retries connecting for ~7.5 s)."""

_LOST = (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError)

# arq's claim of a queued job (not running elsewhere, due now → mark it in progress), as one
# script instead of WATCH, EXISTS, ZSCORE and MULTI/PSETEX/EXEC: four round trips a job.
# KEYS: in-progress key, queue   ARGV: job id, now ms, in-progress ttl ms  -> score or nil
_START = LuaScript("""
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
redis.call('PSETEX', KEYS[1], ARGV[3], '1')
return score
""")


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
        """Start each due job not running elsewhere (arq's start_jobs, one round trip a job).

        Unlike arq's, a start cut off by a lost connection gives its slot back.
        """
        ttl_ms = int(self.in_progress_timeout_s * 1000)
        for raw_id in job_ids:
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            job_id = raw_id.decode()
            try:
                score = await _START(
                    self.pool,
                    [in_progress_key_prefix + job_id, self.queue_name],
                    [job_id, timestamp_ms(), ttl_ms],
                )
            except BaseException:
                self._release_sem_dec_counter_on_complete()
                raise
            if score is None:  # running elsewhere, finished, or deferred by another worker
                self._release_sem_dec_counter_on_complete()
                continue
            task = self.loop.create_task(self.run_job(job_id, int(float(score))))
            task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[job_id] = task

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
