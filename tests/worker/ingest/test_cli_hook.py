"""`memq hook claude-code`, the console script: exit 0, quiet, spool when Redis is away."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from pipeline.events import Event, decode_event
from tests.support.ingest import (
    black_hole,
    closed_port_url,
    console_script,
    short_data_dir,
    stored_bytes,
    subprocess_env,
)
from worker.connect.managed_redis import ManagedRedis
from worker.ingest.spool import Spool
from worker.keys import Keys

pytestmark = pytest.mark.slow  # runs the memq console script or redis-server processes

DATA = Path(__file__).resolve().parents[2] / "data" / "claude_code"
SESSION = "9f2c1e7a-4b3d-4e8f-a1c2-5d6e7f809a1b"
SECRET = "ghp_R7tY2uI9oP4aS6dF1gH3jK8lZ5xC0vB2nM7q"
PRIVATE = "the launch code is 0000"
HEAVY_MODULES = ("typer", "click", "redis", "arq", "anthropic", "openai", "aiosqlite", "httpx")
# The pipeline's prompt side has nothing to do with publishing an event.
# pipeline.turns.evidence is needed: the hook hashes the files a tool call names (about 2.6 ms).
UNNEEDED_MODULES = {"json", "tomllib"} | {
    f"pipeline.{name}"
    for name in ("parser", "modes", "prompts", "classify", "content_hash", "xmltags")
}


def _payload(name: str, **changes: Any) -> str:
    payload = json.loads((DATA / name).read_text())
    payload.update(changes)
    if payload.get("transcript_path") == "TRANSCRIPT":
        payload["transcript_path"] = str(DATA / "transcript.jsonl")
    return json.dumps(payload)


def _hook(
    stdin: str, data_dir: Path, redis_url: str | None, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [console_script(), "hook", "claude-code"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=data_dir,
        env=subprocess_env(data_dir, redis_url, MEMQ_PREFIX="t", **env),
        check=False,
    )
    return done, time.monotonic() - started


@pytest.fixture(scope="module", autouse=True)
def _warm_bytecode_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Compile once so timings measure the hook, not the first compilation of its modules."""
    _hook("{}", tmp_path_factory.mktemp("warm"), closed_port_url())


async def _stream(client: aioredis.Redis) -> list[Event]:
    entries = await client.xrange(Keys("t").events(SESSION))
    return [decode_event(fields[b"event"]) for _, fields in entries]


@pytest.mark.parametrize(
    ("fixture", "kinds"),
    [
        ("user_prompt_submit.json", ["prompt"]),
        ("post_tool_use.json", ["tool_call"]),
        # The turn's Bash call, read back from the transcript (no hook delivered it here).
        ("stop.json", ["tool_call", "summarize"]),
        ("session_end.json", ["end"]),
    ],
)
async def test_each_hook_event_is_published_quietly(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fixture: str, kinds: list[str]
) -> None:
    done, _ = _hook(_payload(fixture), tmp_path, redis_url)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    events = await _stream(redis)
    assert [type(e).__struct_config__.tag for e in events] == kinds
    for event in events:
        assert (event.project, event.agent) == ("shop", "claude-code")
    assert not Spool(tmp_path / "spool", 1).pending()


async def test_session_start_publishes_nothing(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    done, _ = _hook(_payload("session_start.json"), tmp_path, redis_url)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert await redis.dbsize() == 0


@pytest.mark.parametrize(
    ("stdin", "reason"),
    [
        (_payload("post_tool_use.json", session_id=42), "got `int` - at `$.session_id`"),
        (_payload("user_prompt_submit.json", prompt=None), "payload has no `prompt`"),
        ('{"hook_event_name": "Stop"}', "missing required field `session_id`"),
        ("not json at all", "bad Claude Code hook payload"),
    ],
    ids=["int-session", "no-prompt", "no-session", "not-json"],
)
async def test_a_bad_payload_logs_one_line_exits_0_and_publishes_nothing(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, stdin: str, reason: str
) -> None:
    done, _ = _hook(stdin, tmp_path, redis_url)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.startswith("memq hook: nothing published or spooled: ")
    assert reason in done.stderr
    assert done.stderr.count("\n") == 1
    assert await redis.dbsize() == 0
    assert not Spool(tmp_path / "spool", 1).pending()


async def test_redis_down_spools_and_redis_back_flushes_in_order_once(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    down = closed_port_url()
    for name in ("user_prompt_submit.json", "post_tool_use.json", "stop.json"):
        done, _ = _hook(_payload(name), tmp_path, down)
        assert (done.returncode, done.stdout) == (0, "")
        assert "spooled in" in done.stderr
    spool = Spool(tmp_path / "spool", 1 << 30)
    # Stop re-sends the turn's Bash call (read back from the transcript): the flush keeps one.
    assert spool.status().events == 4
    assert await redis.dbsize() == 0

    done, _ = _hook(_payload("session_end.json"), tmp_path, redis_url)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    kinds = [type(e).__struct_config__.tag for e in await _stream(redis)]
    assert kinds == ["prompt", "tool_call", "summarize", "end"]
    assert not spool.pending()
    # Replaying the same tool call (same tool_use_id) adds nothing.
    _hook(_payload("post_tool_use.json"), tmp_path, redis_url)
    assert len(await _stream(redis)) == 4


async def test_a_black_hole_redis_costs_under_a_second_and_the_event_is_spooled(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    with black_hole() as url:
        done, elapsed = _hook(_payload("post_tool_use.json"), tmp_path, url)
    assert (done.returncode, done.stdout) == (0, "")
    assert elapsed < 1.0
    assert "no answer from Redis" in done.stderr
    assert Spool(tmp_path / "spool", 1 << 30).status().events == 1


async def test_past_its_time_budget_the_hook_spools_the_event_and_exits(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    with black_hole() as url:  # and a Redis timeout longer than the hook may take
        done, elapsed = _hook(
            _payload("post_tool_use.json"), tmp_path, url, MEMQ_HOOK_REDIS_TIMEOUT_MS="5000"
        )
    assert (done.returncode, done.stdout) == (0, "")
    assert elapsed < 1.0
    assert done.stderr.startswith(
        "memq hook: gave up within its time budget so the agent is not held up; 1 "
    )
    assert Spool(tmp_path / "spool", 1 << 30).status().events == 1


async def test_secrets_and_private_content_reach_neither_redis_nor_the_spool(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    private = f"<private>{PRIVATE}</private>"
    leaky = {
        "tool_input": {"command": f"git push https://x:{SECRET}@github.com/a/b {private}"},
        "tool_response": {"stdout": f"token={SECRET}\n{private}", "stderr": ""},
    }
    _hook(_payload("post_tool_use.json", **leaky), tmp_path, closed_port_url())
    spooled = (tmp_path / "spool" / "events.jsonl").read_bytes()
    _hook(_payload("user_prompt_submit.json", prompt=f"use {SECRET} <private>{PRIVATE}</private>"),
          tmp_path, redis_url)  # fmt: skip
    assert len(await _stream(redis)) == 2
    everything = spooled + await stored_bytes(redis)
    for needle in (SECRET, PRIVATE, "<private>"):
        assert needle.encode() not in everything, needle


def test_the_hook_imports_no_heavy_module(tmp_path: Path) -> None:
    # PostToolUse runs on every tool call; SessionStart (once a session) may open storage.
    done, _ = _hook(
        _payload("post_tool_use.json"), tmp_path, closed_port_url(), PYTHONPROFILEIMPORTTIME="1"
    )
    imported = set(re.findall(r"\|\s+([\w.]+)\s*$", done.stderr, re.MULTILINE))
    assert "worker.ingest.hook" in imported
    heavy = {m for m in imported if m.split(".")[0] in HEAVY_MODULES}
    assert heavy == set()
    assert imported & UNNEEDED_MODULES == set()


def test_the_hook_loads_msgspec_without_typing_extensions_and_leaves_it_importable() -> None:
    # -X importtime lists a refused import too, so this asks the process itself.
    code = (
        "import sys\n"
        "from worker.cli.entry import _import_msgspec_without_typing_extensions\n"
        "_import_msgspec_without_typing_extensions()\n"
        "import worker.ingest.hook\n"
        "print('typing_extensions' in sys.modules)\n"
        "import typing_extensions\n"
        "print(typing_extensions.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["False", "typing_extensions"]


@pytest.fixture(name="managed_dir")
def _fix_managed_dir() -> Iterator[Path]:
    with short_data_dir() as path:
        yield path
        ManagedRedis(path).stop()


def test_without_memq_redis_url_the_hook_starts_the_managed_redis(managed_dir: Path) -> None:
    done, _ = _hook(_payload("post_tool_use.json"), managed_dir, None)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    client = redis.Redis(unix_socket_path=str(ManagedRedis(managed_dir).socket_path))
    assert client.xlen(Keys("t").events(SESSION)) == 1
    client.close()


def test_starting_the_managed_redis_the_hook_imports_no_heavy_module(managed_dir: Path) -> None:
    # It asks whether the server answers with its own client: redis-py is too slow an import.
    done, _ = _hook(_payload("post_tool_use.json"), managed_dir, None, PYTHONPROFILEIMPORTTIME="1")
    imported = set(re.findall(r"\|\s+([\w.]+)\s*$", done.stderr, re.MULTILINE))
    assert "worker.ingest.hook" in imported
    assert {m for m in imported if m.split(".")[0] in HEAVY_MODULES} == set()
    assert ManagedRedis(managed_dir).answers()
