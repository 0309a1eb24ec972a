"""The worker's CLI as the installed console script: observations, sessions, stats, dlq, worker."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver, Reply
from tests.support.ingest import console_script, subprocess_env
from tests.support.worker_checks import observations, subscribed
from tests.support.worker_harness import (
    drain,
    make_settings,
    prompt,
    publish,
    running_runtime,
    sqlite_store,
    summarize,
    tool_call,
)
from worker.keys import Keys
from worker.settings import Settings
from worker.storage.records import BatchWrite, DroppedOutput

PAYLOAD_FIELDS = {"kind", "id", "memory_session_id", "project", "created_at", "prompt_number"}
OBSERVATION_FIELDS = {"type", "title", "subtitle", "facts", "narrative", "concepts",
                      "files_read", "files_modified"}  # fmt: skip
SUMMARY_FIELDS = {"request", "investigated", "learned", "completed", "next_steps", "notes"}
GARBAGE = "Sure! Here is what I think about those tool calls, in prose."
NOW = datetime(2026, 4, 1, tzinfo=UTC)


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


async def _memq_json(settings: Settings, *args: str) -> Any:
    done = await asyncio.to_thread(_memq, settings, *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def _run(settings: Settings, redis: ArqRedis) -> None:
    async with running_runtime(settings, redis) as rt:
        await drain(rt, redis)


async def test_observations_json_rows_carry_the_broadcast_payload(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    async with subscribed(redis_url, settings) as announced:
        await publish(arq_redis, settings, prompt("s1", 1, "fix it"), tool_call("s1", 1),
                      tool_call("s1", 2), summarize("s1"), tool_call("s2", 1))  # fmt: skip
        await _run(settings, arq_redis)
    rows = await _memq_json(settings, "observations", "--json")
    assert len(rows) == 4
    by_id = {(m["kind"], m["id"]): m for m in announced.messages}
    for row in rows:
        fields = OBSERVATION_FIELDS if row["kind"] == "observation" else SUMMARY_FIELDS
        assert PAYLOAD_FIELDS | fields <= set(row)
        announced_row = by_id[(row["kind"], row["id"])]
        assert {k: row[k] for k in announced_row} == announced_row
    one = await _memq_json(settings, "observations", "--session", "s2", "--json")
    assert [r["memory_session_id"] for r in one] == ["s2"]
    assert len(await _memq_json(settings, "observations", "--limit", "2", "--json")) == 2
    text = await asyncio.to_thread(_memq, settings, "observations", "--session", "s1")
    assert text.returncode == 0
    assert "summary" in text.stdout


async def test_sessions_lists_counts_per_session(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await publish(arq_redis, settings, prompt("s1", 1, "fix it"), tool_call("s1", 1),
                  tool_call("s1", 2), tool_call("s2", 1))  # fmt: skip
    await _run(settings, arq_redis)
    rows = await _memq_json(settings, "sessions", "--json")
    counts = {r["memory_session_id"]: (r["prompts"], r["observations"]) for r in rows}
    assert counts == {"s1": (1, 2), "s2": (0, 1)}
    text = await asyncio.to_thread(_memq, settings, "sessions")
    assert text.returncode == 0
    assert "s1" in text.stdout
    assert "s2" in text.stdout


async def test_stats_says_the_vector_index_is_off_rather_than_a_lag(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, chroma="off")
    await publish(arq_redis, settings, tool_call("s1", 1))
    await _run(settings, arq_redis)
    assert len(await observations(settings, "s1")) == 1
    text = await asyncio.to_thread(_memq, settings, "stats", MEMQ_CHROMA="off")
    assert text.returncode == 0, text.stderr
    assert "vector index: off" in text.stdout
    assert "vector lag" not in text.stdout
    off = await asyncio.to_thread(_memq, settings, "stats", "--json", MEMQ_CHROMA="off")
    assert off.returncode == 0, off.stderr
    # The worker queued nothing for the index while it was off: no lag to report.
    stats = json.loads(off.stdout)
    assert (stats["vector_index"], stats["vector_lag"]) == ("off", 0)
    on = await _memq_json(settings, "stats", "--json")
    assert (on["vector_index"], on["vector_lag"]) == ("on", 0)
    text = await asyncio.to_thread(_memq, settings, "stats")
    assert "vector lag: 0 rows waiting for the vector index" in text.stdout


async def test_stats_json_counts_every_outcome(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, max_attempts="2")
    keys = Keys(settings.prefix)
    same = {"tool_input": {"command": "ls"}, "output": "x"}
    fake_observer.script(
        Reply(text=GARBAGE),  # dropped (s1)
        Reply(text="<skip_summary/>"),  # skipped (s2)
        Reply(status=503), Reply(status=503),  # retry, then dead (s3)
    )  # fmt: skip
    for session in ("s1", "s2", "s3"):
        await publish(arq_redis, settings, tool_call(session, 1))
        await _run(settings, arq_redis)
    await publish(arq_redis, settings, tool_call("s4", 1, **same), tool_call("s4", 2, **same))
    await _run(settings, arq_redis)  # stored 1, deduplicated 1
    await arq_redis.hincrby(keys.outcomes, "paused", 1)  # a pause, as the quota tests make
    await arq_redis.set(keys.pause("openai"), "quota", px=60_000)
    await publish(arq_redis, settings, tool_call("s5", 1), tool_call("s5", 2))  # not drained
    await asyncio.sleep(0.5)  # the oldest entry's age is then at least that: a 0 is wrong
    stats = await _memq_json(settings, "stats", "--json")
    assert set(stats) >= {"streams", "outcomes", "paused_providers", "dead_letters", "tokens",
                          "vector_lag"}  # fmt: skip
    assert stats["streams"]["pending"] == 2
    assert 0.5 <= stats["streams"]["oldest_pending_age_s"] < 60
    counted = ("stored", "deduplicated", "skipped", "paused", "dropped", "retry", "dead")
    assert {k: stats["outcomes"][k] for k in counted} == dict.fromkeys(counted, 1)
    assert stats["paused_providers"] == ["openai"]
    assert stats["dead_letters"] == 1
    assert set(stats["tokens"]) == {"input", "cached_input", "output"}
    assert stats["tokens"]["input"] > 0
    assert stats["tokens"]["output"] > 0
    assert "vector_lag" in stats
    text = await asyncio.to_thread(_memq, settings, "stats")
    assert text.returncode == 0
    assert "paused providers: openai" in text.stdout


async def test_dlq_lists_and_replays_dead_events_and_dropped_replies(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, max_attempts="1")
    dead_call = tool_call("s1", 1)
    fake_observer.script(Reply(status=500, error_message="down for maintenance"),
                         Reply(text=GARBAGE))  # fmt: skip
    await publish(arq_redis, settings, dead_call)
    await _run(settings, arq_redis)
    await publish(arq_redis, settings, tool_call("s2", 1))
    await _run(settings, arq_redis)
    await _store_parseable_dropped_reply(settings)
    listed = await _memq_json(settings, "dlq", "list", "--json")
    (dead,) = listed["dead"]
    assert dead["session"] == "s1"
    assert "down for maintenance" in dead["reason"]
    assert json.loads(dead["event"])["event_id"] == dead_call.event_id
    assert sorted(d["category"] for d in listed["dropped"]) == ["prose", "prose"]
    # The cause is fixed (the observer is back): replay everything.
    async with subscribed(redis_url, settings) as announced:
        results = await _memq_json(settings, "dlq", "replay", "--all", "--json")
    statuses = sorted((r["status"], r["id"].startswith("dropped:")) for r in results)
    assert statuses == [("replayed", False), ("replayed", True), ("skipped", True)]
    assert [m["title"] for m in announced.messages] == ["Parsed after the fix"]
    await _run(settings, arq_redis)
    titles = [r.title for r in await observations(settings, "s1")]
    assert len(titles) == 1
    assert titles[0] is not None
    assert titles[0].startswith("Bash")
    assert "Parsed after the fix" in [r.title for r in await observations(settings, "s3")]
    after = await _memq_json(settings, "dlq", "list", "--json")
    assert after["dead"] == []
    assert [d["raw"] for d in after["dropped"]] == [GARBAGE]  # still unparseable, still kept


async def _store_parseable_dropped_reply(settings: Settings) -> None:
    """A reply an older parser dropped, which today's parser reads."""
    raw = ("<observation><type>discovery</type><title>Parsed after the fix</title>"
           "<narrative>Kept for replay.</narrative></observation>")  # fmt: skip
    store = sqlite_store(settings)
    try:
        await store.write_batch(BatchWrite(
            memory_session_id="s3", project="demo", fence=0, event_ids=[],
            dropped=[DroppedOutput(memory_session_id="s3", project="demo", category="prose",
                                   raw=raw, event_ids=["s3-old"], created_at=NOW)],
        ))  # fmt: skip
    finally:
        await store.aclose()


@pytest.mark.parametrize("args", [["dlq", "replay"], ["dlq", "replay", "--id", "dropped:x"]])
def test_dlq_replay_without_a_target_is_bad_input(tmp_path: Path, args: list[str]) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", "http://127.0.0.1:1")
    done = _memq(settings, *args)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("processes", ["1", "2"])
def test_worker_without_an_observer_refuses_to_start_with_one_line(
    tmp_path: Path, processes: str
) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", "http://127.0.0.1:1")
    done = subprocess.run(
        [console_script(), "worker", "--processes", processes],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(tmp_path, "redis://127.0.0.1:1/0"),
        cwd=settings.data_path,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "ANTHROPIC_API_KEY" in line
    assert "OPENAI_BASE_URL" in line


def test_worker_processes_whose_metrics_ports_pass_65535_are_bad_input(tmp_path: Path) -> None:
    done = subprocess.run(
        [console_script(), "worker", "--processes", "3", "--metrics-port", "65534"],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(tmp_path, "redis://127.0.0.1:1/0", ANTHROPIC_API_KEY="test-key"),
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "65535" in line
