"""LuaStartWorker.start_jobs against a real Redis, and the arq internals it relies on."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from arq import Worker
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.support.ports import free_port
from worker.queue.arq_start_jobs import LuaStartWorker
from worker.queue.scheduling import job_deserializer, job_serializer

QUEUE = "t1:queue"
MAX_JOBS = 2


async def _hold(ctx: dict[Any, Any]) -> None:
    await ctx["release"].wait()


def _worker(pool: ArqRedis, release: asyncio.Event) -> LuaStartWorker:
    return LuaStartWorker(
        functions=[_hold], redis_pool=pool, queue_name=QUEUE, max_jobs=MAX_JOBS,
        handle_signals=False, keep_result=0, ctx={"release": release},
        job_serializer=job_serializer, job_deserializer=job_deserializer,
    )  # fmt: skip


async def _free_slots(worker: Worker) -> int:
    """How many times the slot semaphore can be taken without waiting (then given back)."""
    taken = 0
    while taken <= MAX_JOBS + 1:
        try:
            await asyncio.wait_for(worker.sem.acquire(), 0.05)
        except TimeoutError:
            break
        taken += 1
    for _ in range(taken):
        worker.sem.release()
    return taken


def test_the_arq_internals_start_jobs_replaces_are_still_there() -> None:
    # arq's poll loop must still hand its due ids to start_jobs, for the override to be used.
    assert "await self.start_jobs(job_ids)" in inspect.getsource(Worker._poll_iteration)
    assert list(inspect.signature(Worker.start_jobs).parameters) == ["self", "job_ids"]
    assert list(inspect.signature(Worker.run_job).parameters) == ["self", "job_id", "score"]
    release = inspect.getsource(Worker._release_sem_dec_counter_on_complete)
    assert "self.job_counter = self.job_counter - 1" in release
    assert "self.sem.release()" in release
    arq_start = inspect.getsource(Worker.start_jobs)
    for step in ("await self.sem.acquire()", "pipe.psetex(in_progress_key", "self.run_job("):
        assert step in arq_start, f"arq's start_jobs changed: no {step!r}"


async def test_due_jobs_start_once_and_the_slots_come_back(arq_redis: ArqRedis) -> None:
    release = asyncio.Event()
    worker = _worker(arq_redis, release)
    for job_id in ("j1", "j2", "j3"):
        await arq_redis.enqueue_job("_hold", _job_id=job_id, _queue_name=QUEUE)
    free = await _free_slots(worker)
    await worker.start_jobs([b"j1", b"j1", b"j2", b"j3"])  # j1 twice: the second is skipped
    assert sorted(worker.tasks) == ["j1", "j2"]  # j3 waits: both slots are taken
    assert worker.job_counter == MAX_JOBS
    assert await arq_redis.exists(in_progress_key_prefix + "j1") == 1
    assert await arq_redis.exists(in_progress_key_prefix + "j3") == 0
    release.set()
    await asyncio.gather(*worker.tasks.values())
    await asyncio.sleep(0)  # the tasks' done-callbacks give the slots back
    assert worker.job_counter == 0
    assert await _free_slots(worker) == free
    assert await arq_redis.zrange(QUEUE, 0, -1) == [b"j3"]


async def test_a_start_that_loses_redis_gives_its_slot_back() -> None:
    # Nothing listens on the port: the start's round trip fails as a lost Redis does.
    url = f"redis://127.0.0.1:{free_port()}"
    pool = ArqRedis.from_url(url, retry=Retry(NoBackoff(), 0), socket_connect_timeout=1)
    worker = _worker(pool, asyncio.Event())
    free = await _free_slots(worker)
    try:
        with pytest.raises(RedisConnectionError):
            await worker.start_jobs([b"j1"])
        assert worker.job_counter == 0
        assert await _free_slots(worker) == free
    finally:
        await pool.aclose()


async def test_a_job_running_here_is_not_started_again_when_its_claim_is_gone(
    arq_redis: ArqRedis,
) -> None:
    # After a failover the new primary may lack the in-progress key of a job this worker runs
    # (asynchronous replication): a second run of the same id broke arq's bookkeeping of it.
    release = asyncio.Event()
    worker = _worker(arq_redis, release)
    await arq_redis.enqueue_job("_hold", _job_id="j1", _queue_name=QUEUE)
    await worker.start_jobs([b"j1"])
    first = worker.tasks["j1"]
    await arq_redis.delete(in_progress_key_prefix + "j1")  # the claim the failover lost
    await worker.start_jobs([b"j1"])
    assert worker.tasks["j1"] is first
    assert worker.job_counter == 1
    release.set()
    await first
