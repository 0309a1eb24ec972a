"""The one reach into arq's Worker internals: slots that a start cut off by lost Redis leaked.

arq's `Worker.start_jobs` counts a slot (`job_counter`, `sem`) before its Redis round trips and
gives it back only on a clean answer: a lost connection there leaks the slot for good, and a
worker that lost all `max_jobs` of them over a few outages would never start a job again.
tests/worker/queue/test_arq_internals.py fails when the installed arq changes any of this.
"""

from __future__ import annotations

import asyncio

from arq import Worker


async def reclaim_lost_slots(worker: Worker) -> int:
    """Give back the slots counted for jobs that never started; returns how many (0 normally).

    Call it only between two runs of `main()`, when nothing can start a job.
    """
    running = sum(1 for task in worker.tasks.values() if not task.done())
    # Tasks that just finished release their slot from a done-callback the loop runs soon;
    # yield once so those run. A task finishing meanwhile lowers job_counter: never over-release.
    await asyncio.sleep(0)
    lost = max(0, worker.job_counter - running)
    for _ in range(lost):
        worker.job_counter -= 1
        worker.sem.release()
    return lost
