"""arq's private `Worker.start_jobs`, replaced: one Lua call a job instead of four round trips.

arq's poll (every 50 ms) walks every due job id, the running ones included, until its slots
are full; at 1-2 s observer latency its WATCH/EXISTS/ZSCORE/MULTI start took 18 % more worker
CPU per event (`bench/throughput.py --observer-latency-ms 1000,2000`). It also leaks the slot
of a start cut off by lost Redis.
tests/worker/queue/test_arq_start_jobs.py fails when the installed arq changes what this uses.
"""

from __future__ import annotations

from arq import Worker
from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms

from worker.connect.lua import LuaScript

# arq's claim of a queued job (not running elsewhere, due now → mark it in progress).
# KEYS: in-progress key, queue   ARGV: job id, now ms, in-progress ttl ms  -> score or nil
_START = LuaScript("""
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
redis.call('PSETEX', KEYS[1], ARGV[3], '1')
return score
""")


class LuaStartWorker(Worker):
    """arq's Worker whose start of a due job is one script (arq's private slot accounting)."""

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """Start each due job not running elsewhere; a start cut off by lost Redis gives its
        slot back (arq's keeps it for good)."""
        ttl_ms = int(self.in_progress_timeout_s * 1000)
        for raw_id in job_ids:
            job_id = raw_id.decode()
            running = self.tasks.get(job_id)
            if running is not None and not running.done():
                # Already running here: a failover's new primary may lack its in-progress key
                # (replication is asynchronous), and arq keys its running jobs by id.
                continue
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
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
