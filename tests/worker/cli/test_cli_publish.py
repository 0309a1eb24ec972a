"""`memq publish` as the installed console script: JSON lines in, one result line per event."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import End, Event, Prompt, ToolCall, decode_event, encode_event
from tests.support.ingest import closed_port_url, console_script, subprocess_env
from worker.keys import Keys

pytestmark = pytest.mark.slow  # runs the memq console script or redis-server processes

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
EVENTS: list[Event] = [
    Prompt(event_id="p1", memory_session_id="s1", project="shop", occurred_at=NOW,
           prompt_text="Fix the cart"),
    ToolCall(event_id="t1", memory_session_id="s1", project="shop", occurred_at=NOW,
             tool_name="Bash", tool_input={"command": "pytest"}, tool_output="ok", cwd="/w"),
    End(event_id="e1", memory_session_id="s1", project="shop", occurred_at=NOW, reason="done"),
]  # fmt: skip


def _lines(events: list[Event]) -> str:
    return "".join(encode_event(e).decode() + "\n" for e in events)


def _publish(
    stdin: str, data_dir: Path, redis_url: str, *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), "publish", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd or data_dir,
        env=subprocess_env(data_dir, redis_url, MEMQ_PREFIX="t", **env),
        check=False,
    )


def _start_publish(data_dir: Path, redis_url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [console_script(), "publish"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=data_dir,
        env=subprocess_env(data_dir, redis_url, MEMQ_PREFIX="t"),
    )


async def _stored(redis: aioredis.Redis, session: str = "s1") -> list[tuple[str, Event]]:
    entries = await redis.xrange(Keys("t").events(session))
    return [(i.decode(), decode_event(f[b"event"])) for i, f in entries]


async def test_each_event_prints_its_id_and_stream_id(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    done = _publish(_lines(EVENTS), tmp_path, redis_url)
    stored = await _stored(redis)
    assert done.returncode == 0
    assert done.stdout.splitlines() == [f"{e.event_id} {sid}" for sid, e in stored]
    assert [e for _, e in stored] == EVENTS
    assert done.stderr == "memq: 3 published, 0 duplicates, 0 rejected\n"


async def test_a_second_publish_reports_duplicates(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    _publish(_lines(EVENTS), tmp_path, redis_url)
    again = _publish(_lines(EVENTS), tmp_path, redis_url)
    assert again.stdout.splitlines() == ["p1 duplicate", "t1 duplicate", "e1 duplicate"]
    assert again.stderr == "memq: 0 published, 3 duplicates, 0 rejected\n"
    assert len(await _stored(redis)) == 3


async def test_json_output_has_one_object_per_event(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    done = _publish(_lines(EVENTS[:1]), tmp_path, redis_url, "--json")
    ((sid, _),) = await _stored(redis)
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"event_id": "p1", "memory_session_id": "s1", "status": "added", "stream_id": sid}
    ]


async def test_malformed_lines_are_reported_and_the_valid_ones_still_published(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    bad_kind = json.dumps({**json.loads(encode_event(EVENTS[0])), "kind": "nope"})
    stdin = "\n".join([
        encode_event(EVENTS[0]).decode(), "{not json", encode_event(EVENTS[1]).decode(), "",
        bad_kind, encode_event(EVENTS[2]).decode(),
    ]) + "\n"  # fmt: skip
    done = _publish(stdin, tmp_path, redis_url)
    assert done.returncode == 2
    assert [e for _, e in await _stored(redis)] == EVENTS
    err = done.stderr.splitlines()
    assert err[0].startswith("memq: line 2: bad event: ")
    assert err[1].startswith("memq: line 5: bad event: ")
    assert "`$.kind`" in err[1]
    assert err[2] == (
        "memq: 3 published, 0 duplicates, 2 rejected (lines 2, 5); the valid lines were published"
    )
    assert len(done.stdout.splitlines()) == 3


@pytest.mark.parametrize("via", ["MEMQ_PROJECT", "git"])
async def test_a_line_without_project_gets_the_producers_project(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, via: str
) -> None:
    line = json.loads(encode_event(EVENTS[0]))
    del line["project"]
    repo = tmp_path / "billing"
    (repo / ".git").mkdir(parents=True)
    env = {"MEMQ_PROJECT": "billing"} if via == "MEMQ_PROJECT" else {}
    done = _publish(json.dumps(line) + "\n", tmp_path, redis_url, cwd=repo, **env)
    assert done.returncode == 0, done.stderr
    ((_, stored),) = await _stored(redis)
    assert stored.project == "billing"


async def test_two_processes_publishing_the_same_lines_store_each_event_once(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    events = [
        ToolCall(event_id=f"t{i}", memory_session_id="s1", project="shop", occurred_at=NOW,
                 tool_name="Bash", tool_input={"n": i})
        for i in range(2000)  # several batches each, so the two processes overlap
    ]  # fmt: skip
    stdin = _lines(events)
    procs = [_start_publish(tmp_path, redis_url) for _ in range(2)]
    outputs = [p.communicate(stdin, timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    stored = await _stored(redis)
    assert sorted(e.event_id for _, e in stored) == sorted(e.event_id for e in events)
    added = [line for out in outputs for line in out.splitlines() if "duplicate" not in line]
    assert sorted(added) == sorted(f"{e.event_id} {sid}" for sid, e in stored)


async def test_backpressure_exits_1_with_one_line(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    done = _publish(_lines(EVENTS), tmp_path, redis_url, MEMQ_MAX_PENDING_PER_SESSION="2")
    assert done.returncode == 1
    err = done.stderr.splitlines()
    assert err[0] == (
        "memq: session s1 already holds 2 unprocessed events (MEMQ_MAX_PENDING_PER_SESSION=2): "
        "publishing refused until the workers catch up"
    )
    assert err[1].startswith("memq: 2 published, 0 duplicates, 0 rejected")
    assert len(done.stdout.splitlines()) == 2
    assert len(await _stored(redis)) == 2


def test_unreachable_redis_exits_1_with_one_line(tmp_path: Path) -> None:
    done = _publish(_lines(EVENTS), tmp_path, closed_port_url())
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("memq: cannot reach Redis at redis://127.0.0.1:")
