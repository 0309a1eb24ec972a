"""bench/fleet.py's own judgement: which runs count as expected, and Redis CPU across a kill."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.fleet import Outcome
from bench.fleet_servers import RedisCpu
from tests.support.fleet_accounting import FleetReport


def _report(
    published: int, stored: int, lost: list[str], *, missing: int = 0, queued: int = 0
) -> FleetReport:
    return FleetReport(
        published=published, stored=stored, dropped=0, dead=0, lost=lost, double_counted=[],
        unexpected=[], duplicated=0, stored_without_observation=0, order_problems=[],
        observer_order_problems=[], missing_vectors=missing, latency_p50_ms=None,
        latency_p99_ms=None, hook_failures=0, hook_p50_ms=None, worker_cpu_s={},
        worker_starts={}, redis_cpu_s=None, redis_cpu_ms_per_event=None,
        vector_outbox_pending=queued,
    )  # fmt: skip


def _outcome(fault: str, report: FleetReport, lost_to_replication: int) -> Outcome:
    return Outcome(
        fault=fault, report=report, what="", took_s=1.0, lost_to_replication=lost_to_replication
    )


def test_a_balanced_run_is_as_expected_under_any_fault() -> None:
    assert _outcome("worker-kill", _report(10, 10, []), 0).as_expected()


def test_only_a_failover_without_wait_may_lose_and_only_to_replication() -> None:
    lossy = _report(10, 8, ["a", "b"])
    assert _outcome("redis-failover", lossy, 2).as_expected()
    # A call lost otherwise (the promoted primary had it) is a bug, failover or not.
    assert not _outcome("redis-failover", lossy, 1).as_expected()
    # With MEMQ_PUBLISH_WAIT_REPLICAS=1 nothing may be lost at all.
    assert not _outcome("redis-failover-wait1", lossy, 2).as_expected()
    assert not _outcome("worker-kill", lossy, 2).as_expected()


def test_observations_without_vectors_pass_only_while_their_rows_are_queued() -> None:
    assert _outcome("worker-kill", _report(10, 10, [], missing=3, queued=3), 0).as_expected()
    # Marked indexed, yet not in the index: lost vectors.
    assert not _outcome("worker-kill", _report(10, 10, [], missing=3, queued=2), 0).as_expected()


def test_redis_cpu_keeps_what_a_killed_process_had_used() -> None:
    busy = "import time\nend = time.process_time() + 0.1\nwhile time.process_time() < end: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", busy + "time.sleep(30)"])
    try:
        meter = RedisCpu()
        deadline = time.monotonic() + 30
        while meter.sample([proc.pid]) < 0.08:
            assert time.monotonic() < deadline, "the child never used its CPU"
            time.sleep(0.05)
        before = meter.sample([proc.pid])
    finally:
        proc.kill()
        proc.wait(10)
    assert meter.sample([proc.pid]) == before  # gone, yet still counted
    assert meter.sample([]) == before
