"""arq's slot accounting as reclaim_lost_slots needs it: fails when the installed arq changes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from arq import Worker
from arq.connections import ArqRedis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.support.ports import free_port
from worker.queue.arq_internals import reclaim_lost_slots

MAX_JOBS = 3


async def _noop(ctx: dict[Any, Any]) -> None:
    pass


def _worker(pool: ArqRedis) -> Worker:
    return Worker(functions=[_noop], redis_pool=pool, max_jobs=MAX_JOBS, handle_signals=False)


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


async def test_arqs_start_jobs_still_leaks_the_slot_a_lost_connection_cut_off() -> None:
    # Nothing listens on the port: the start's first round trip fails as a lost Redis does.
    url = f"redis://127.0.0.1:{free_port()}"
    pool = ArqRedis.from_url(url, retry=Retry(NoBackoff(), 0), socket_connect_timeout=1)
    worker = _worker(pool)
    free = await _free_slots(worker)
    try:
        with pytest.raises(RedisConnectionError):
            await worker.start_jobs([b"job-1"])
        # If arq gives the slot back itself now, reclaim_lost_slots can go: delete it.
        assert worker.job_counter == 1, "arq's start_jobs no longer leaks a slot"
        assert await _free_slots(worker) == free - 1
        assert await reclaim_lost_slots(worker) == 1
        assert worker.job_counter == 0
        assert await _free_slots(worker) == free
        assert await reclaim_lost_slots(worker) == 0
    finally:
        await pool.aclose()


def _finished(worker: Worker) -> None:
    worker.job_counter -= 1
    worker.sem.release()


async def test_a_running_job_keeps_its_slot(arq_redis: ArqRedis) -> None:
    worker = _worker(arq_redis)
    release = asyncio.Event()
    # A job as arq's start_jobs starts one: slot taken, counted, task tracked.
    await worker.sem.acquire()
    worker.job_counter += 1
    task = asyncio.create_task(release.wait())
    task.add_done_callback(lambda _: _finished(worker))
    worker.tasks["running"] = task
    assert await reclaim_lost_slots(worker) == 0
    assert worker.job_counter == 1
    release.set()
    await task
    assert await reclaim_lost_slots(worker) == 0  # its own callback gave the slot back
    assert worker.job_counter == 0
