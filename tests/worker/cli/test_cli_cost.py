"""`memq stats`' cost section, from turns the real worker stored with the fake observer."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver, RecordedRequest, Reply, deterministic_reply
from tests.support.ingest import console_script, subprocess_env
from tests.support.worker_harness import (
    drain,
    make_settings,
    publish,
    running_runtime,
    sqlite_store,
    tool_call,
)
from worker.settings import Settings

INPUT, CACHED, OUTPUT = 1200, 500, 80
PRICES = {
    "MEMQ_PRICE_INPUT_PER_MTOK": "3",
    "MEMQ_PRICE_CACHED_PER_MTOK": "0.3",
    "MEMQ_PRICE_OUTPUT_PER_MTOK": "15",
}


def _memq(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(settings.data_path, settings.redis_url, **env),
        cwd=settings.data_path,
        check=False,
    )


async def _stats(settings: Settings, **env: str) -> Any:
    done = await asyncio.to_thread(_memq, settings, "stats", "--json", **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _fixed_usage(request: RecordedRequest) -> Reply:
    # The deterministic observation, with token counts the test knows.
    reply = deterministic_reply(request)
    return msgspec.structs.replace(
        reply, input_tokens=INPUT, cached_input_tokens=CACHED, output_tokens=OUTPUT
    )


def _now_call(session: str, n: int, project: str) -> Any:
    # Stamped now, so the observations fall inside the window whenever the test runs.
    call = tool_call(session, n, project=project)
    return msgspec.structs.replace(call, occurred_at=datetime.now(UTC))


async def test_stats_cost_equals_what_the_observer_reported(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    fake_observer.responder = _fixed_usage
    await publish(arq_redis, settings, _now_call("s1", 1, "alpha"), _now_call("s1", 2, "alpha"))
    await publish(arq_redis, settings, _now_call("s2", 1, "beta"))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    calls = len(fake_observer.requests)
    store = sqlite_store(settings)
    try:
        stored = len(await store.observations())
    finally:
        await store.aclose()
    assert calls >= 2
    assert stored == 3

    stats = await _stats(settings)
    assert set(stats) >= {"streams", "outcomes", "tokens", "store", "cost"}
    cost = stats["cost"]
    assert cost["window_days"] == 14
    assert cost["last_day"] == datetime.now(UTC).date().isoformat()
    totals = {k: cost[k] for k in ("input_tokens", "cached_input_tokens", "output_tokens")}
    assert totals == {
        "input_tokens": calls * INPUT,
        "cached_input_tokens": calls * CACHED,
        "output_tokens": calls * OUTPUT,
    }
    assert (cost["calls"], cost["observations"]) == (calls, 3)
    assert cost["per_observation"] == {
        "input_tokens": round(calls * INPUT / 3, 1),
        "cached_input_tokens": round(calls * CACHED / 3, 1),
        "output_tokens": round(calls * OUTPUT / 3, 1),
    }
    assert (cost["prices"], cost["spend"]) == (None, None)
    assert cost["reported_cost_usd"] is None  # the HTTP providers report no cost of their own
    by_project: dict[str, list[int]] = {}
    for day in cost["days"]:
        sums = by_project.setdefault(day["project"], [0, 0])
        sums[0] += day["observations"]
        sums[1] += day["calls"]
        assert day["input_tokens"] == day["calls"] * INPUT
        assert day["spend"] is None
    assert {p: s[0] for p, s in by_project.items()} == {"alpha": 2, "beta": 1}
    assert sum(s[1] for s in by_project.values()) == calls

    priced = (await _stats(settings, **PRICES))["cost"]
    per_call = ((INPUT - CACHED) * 3 + CACHED * 0.3 + OUTPUT * 15) / 1_000_000
    assert priced["prices"] == {"input": 3.0, "cached_input": 0.3, "output": 15.0}
    assert abs(priced["spend"] - calls * per_call) < 1e-12

    text = await asyncio.to_thread(_memq, settings, "stats")
    assert text.returncode == 0, text.stderr
    assert f"{calls} observer calls, 3 observations stored" in text.stdout
    per = cost["per_observation"]
    assert f"tokens per observation: input={per['input_tokens']}" in text.stdout
    rows = [line.split() for line in text.stdout.splitlines() if line.startswith("  20")]
    assert sorted(r[1] for r in rows) == ["alpha", "beta"]
    assert sum(int(r[4]) for r in rows) == calls * INPUT  # the table's input column
    assert "spend" not in text.stdout
    assert "as the observer reported it" not in text.stdout
    text = await asyncio.to_thread(_memq, settings, "stats", **PRICES)
    assert f"spend {calls * per_call:.4f} at the MEMQ_PRICE_* prices" in text.stdout


async def test_stats_refuses_a_partial_price_list(tmp_path: Path, redis_url: str) -> None:
    settings = make_settings(tmp_path, redis_url, "http://127.0.0.1:9")
    done = await asyncio.to_thread(
        _memq, settings, "stats", MEMQ_PRICE_INPUT_PER_MTOK="3", MEMQ_PRICE_OUTPUT_PER_MTOK="15"
    )
    assert done.returncode != 0
    assert "MEMQ_PRICE_CACHED_PER_MTOK" in done.stderr
    assert "Traceback" not in done.stderr
