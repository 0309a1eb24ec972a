"""Observer replies are bounded end to end: real Redis, the worker, SQLite and the fake observer.

A reply with thousands of observations stores the first MEMQ_MAX_OBSERVATIONS_PER_TURN, each
field cut to MEMQ_FIELD_BUDGET_CHARS; a reply past MEMQ_OBSERVER_MAX_REPLY_BYTES is dropped
unread (never asked again); a reply that drips is cut off at MEMQ_OBSERVER_TIMEOUT_S in all.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from arq.connections import ArqRedis

from pipeline.outcomes import JobResult
from tests.support.fake_observer import FakeObserver, Reply
from tests.support.ingest import REPO, console_script, subprocess_env
from tests.support.worker_checks import dropped_rows, observations, outcomes, unacked
from tests.support.worker_harness import make_settings, publish, running_runtime, tool_call
from worker.sessions.session_run import observe


def _observation(n: int, narrative: str = "") -> str:
    return (
        f"<observation><type>discovery</type><title>finding {n}</title>"
        f"<narrative>{narrative or f'detail {n}'}</narrative></observation>"
    )


async def test_ten_thousand_observations_for_one_call_store_the_cap_with_a_reason(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(
        tmp_path,
        redis_url,
        fake_observer.url,
        max_observations_per_turn="20",
        field_budget_chars="2000",
        observer_max_reply_bytes="4194304",
    )
    reply = "\n".join(_observation(n, "y" * 50_000 if n == 0 else "") for n in range(10_000))
    fake_observer.script(Reply(text=reply))
    await publish(arq_redis, settings, tool_call("c1", 1), tool_call("c2", 1))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "c1", rt.keys.job_id("c1", 1)) is JobResult.DRAINED
        # Another session is not held back by the capped one.
        assert await observe(rt, "c2", rt.keys.job_id("c2", 1)) is JobResult.DRAINED
    stored = await observations(settings, "c1")
    assert [r.title for r in stored] == [f"finding {n}" for n in range(20)]
    first = stored[0]
    assert first.narrative is not None
    assert len(first.narrative) <= 2000 + 80  # the <elided …/> marker
    assert "elided" in first.narrative
    [row] = [d for d in await dropped_rows(settings) if d.category == "capped"]
    assert row.reason == (
        "kept 20 of 10000 observations (MEMQ_MAX_OBSERVATIONS_PER_TURN=20);"
        " cut 1 field(s) to 2000 characters (MEMQ_FIELD_BUDGET_CHARS)"
    )
    assert len(row.raw) <= 16_000
    counts = await outcomes(arq_redis, settings)
    assert counts["stored"] == 20 + 1
    assert counts["stored:capped"] == 1
    assert len(await observations(settings, "c2")) == 1
    assert await unacked(arq_redis, settings, "c1") == (0, 0)  # acked (trimmed)
    # `memq dlq replay --all` leaves the capped row alone: replaying it would store past the cap.
    env = subprocess_env(tmp_path, redis_url, PYTHONPATH=str(REPO), MEMQ_CHROMA="off")
    replayed = await asyncio.to_thread(
        subprocess.run, [console_script(), "dlq", "replay", "--all"], capture_output=True,
        text=True, timeout=60, env=env,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    assert "capped: cut by a limit, not a parser failure" in replayed.stdout
    assert len(await observations(settings, "c1")) == 20


async def test_a_reply_past_the_byte_cap_is_dropped_with_its_reason_and_not_asked_again(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, observer_max_reply_bytes="65536"
    )
    fake_observer.script(Reply(text=_observation(1, "z" * 5_000_000)))
    await publish(arq_redis, settings, tool_call("b1", 1), tool_call("b1", 2))
    async with running_runtime(settings, arq_redis) as rt:
        assert await observe(rt, "b1", rt.keys.job_id("b1", 1)) is JobResult.DRAINED
    [row] = await dropped_rows(settings)
    assert row.category == "too_large"
    assert row.reason == (
        "anthropic observer: reply over 65536 bytes (MEMQ_OBSERVER_MAX_REPLY_BYTES),"
        " not read further"
    )
    assert 0 < len(row.raw) <= 16_000
    assert await observations(settings, "b1") == []
    assert len(fake_observer.requests) == 1  # paid for once, never asked again
    counts = await outcomes(arq_redis, settings)
    assert counts["dropped:too_large"] == 1
    assert counts.get("retry", 0) == 0
    assert await unacked(arq_redis, settings, "b1") == (0, 0)


async def test_a_dripping_reply_holds_an_attempt_no_longer_than_the_observer_timeout(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, observer_timeout_s="1")
    fake_observer.script(Reply(text=_observation(1), drip_s=0.2))
    await publish(arq_redis, settings, tool_call("d1", 1))
    async with running_runtime(settings, arq_redis) as rt:
        started = time.monotonic()
        assert await observe(rt, "d1", rt.keys.job_id("d1", 1)) is JobResult.RETRY
        held_s = time.monotonic() - started
        # The retry asks again (the deterministic fake now answers at once) and stores.
        await rt.redis.zrem(rt.keys.queue, rt.keys.job_id("d1", 2))
        assert await observe(rt, "d1", rt.keys.job_id("d1", 3)) is JobResult.DRAINED
    assert held_s < 2.5
    assert len(await observations(settings, "d1")) == 1
    counts = await outcomes(arq_redis, settings)
    assert counts["retry"] == 1
