"""`memq agent`, the HTTP hook: real uvicorn on 127.0.0.1, real redis-server and storage."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from pipeline.events import Event
from pipeline.turns.content_hash import compute_observation_content_hash
from tests.support.hook_agent import (
    KINDS,
    PREFIX,
    SESSION,
    agent_settings,
    eventually,
    has_events,
    payload,
    running_agent,
    stream,
)
from tests.support.ingest import console_script, stored_bytes, subprocess_env
from worker.errors import ConfigError
from worker.ingest.agent import HOOK_PATH, check_agent_bind
from worker.ingest.spool import Spool
from worker.keys import Keys
from worker.secret import Secret
from worker.storage.records import BatchWrite, ObservationRow
from worker.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.slow  # runs uvicorn, redis-server and the memq console script

SECRET = "ghp_R7tY2uI9oP4aS6dF1gH3jK8lZ5xC0vB2nM7q"
TOKEN = "0123456789abcdef0123"
# Random per event (ids of prompts, stops and ends) or the moment it was recorded.
_VARYING = {"event_id", "occurred_at"}


def _comparable(event: Event) -> dict[str, Any]:
    fields = msgspec.to_builtins(event)
    return {k: v for k, v in fields.items() if k not in _VARYING}


def _command_hook(raw: bytes, data_dir: Path, redis_url: str, prefix: str) -> str:
    done = subprocess.run(
        [console_script(), "hook", "claude-code"],
        input=raw,
        capture_output=True,
        timeout=30,
        cwd=data_dir,
        env=subprocess_env(data_dir, redis_url, MEMQ_PREFIX=prefix),
        check=True,
    )
    assert done.stderr == b""
    return done.stdout.decode()


async def test_every_event_kind_lands_as_the_command_hook_puts_it(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    async with running_agent(agent_settings(tmp_path, redis_url)) as client:
        for name, _ in KINDS:
            answer = await client.post(HOOK_PATH, content=payload(name))
            assert (answer.status_code, answer.text) == (200, "")
        await eventually(has_events(redis, len(KINDS)))
    for name, _ in KINDS:
        _command_hook(payload(name), tmp_path, redis_url, "cmd")
    by_http, by_command = await stream(redis), await stream(redis, "cmd")
    assert [type(e).__struct_config__.tag for e in by_http] == [kind for _, kind in KINDS]
    assert [_comparable(e) for e in by_http] == [_comparable(e) for e in by_command]
    assert not Spool(tmp_path / "spool", 1).pending()


async def test_session_start_answers_the_command_hooks_context(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    await _seed(tmp_path / "memq.db")
    session_start = payload("session_start.json")
    printed = _command_hook(session_start, tmp_path, redis_url, "cmd")
    assert "Login test fixed" in json.loads(printed)["hookSpecificOutput"]["additionalContext"]
    async with running_agent(agent_settings(tmp_path, redis_url)) as client:
        answer = await client.post(HOOK_PATH, content=session_start)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == json.loads(printed)
    assert await redis.dbsize() == 0  # SessionStart is no event


async def _seed(path: Path) -> None:
    title, narrative = "Login test fixed", "The session cookie expired before the assertion."
    store = SqliteStore(path)
    await store.write_batch(
        BatchWrite(
            memory_session_id="s1",
            project="shop",
            fence=1,
            event_ids=["e1"],
            observations=[
                ObservationRow(
                    memory_session_id="s1",
                    project="shop",
                    type="bugfix",
                    title=title,
                    subtitle="",
                    facts=[],
                    narrative=narrative,
                    concepts=[],
                    files_read=[],
                    files_modified=[],
                    prompt_number=1,
                    content_hash=compute_observation_content_hash("s1", title, narrative),
                    created_at=datetime(2026, 11, 2, 9, 30, tzinfo=UTC),
                )
            ],
        )
    )
    await store.aclose()


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": TOKEN}]
)
async def test_a_missing_or_wrong_token_is_401_and_records_nothing(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, headers: dict[str, str]
) -> None:
    settings = agent_settings(tmp_path, redis_url, agent_token=Secret(TOKEN))
    async with running_agent(settings) as client:
        answer = await client.post(HOOK_PATH, content=payload("session_end.json"), headers=headers)
        assert answer.status_code == 401
        assert answer.text.startswith("memq agent: ")
        assert answer.text.count("\n") == 1
        good = {"Authorization": f"Bearer {TOKEN}"}
        answer = await client.post(HOOK_PATH, content=payload("session_end.json"), headers=good)
        assert answer.status_code == 200
        await eventually(has_events(redis, 1))
    assert len(await stream(redis)) == 1


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "https://evil.example"}, 403),  # a web page's cross-site POST
        ({"Origin": "null"}, 403),
        ({"Host": "evil.example"}, 421),  # DNS rebinding: a page's own name, our address
        ({"Host": "evil.example:8766"}, 421),
    ],
)
async def test_a_browser_can_neither_plant_events_nor_read_a_context(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, headers: dict[str, str], status: int
) -> None:
    async with running_agent(agent_settings(tmp_path, redis_url)) as client:
        for name in ("post_tool_use.json", "session_start.json"):
            answer = await client.post(HOOK_PATH, content=payload(name), headers=headers)
            assert answer.status_code == status
            assert answer.text.startswith("memq agent: ")
        answer = await client.post(HOOK_PATH, content=payload("post_tool_use.json"))
        assert answer.status_code == 200  # Claude Code: loopback Host, no Origin
        await eventually(has_events(redis, 1))
    assert len(await stream(redis)) == 1


async def test_an_oversize_body_is_413(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    settings = agent_settings(tmp_path, redis_url, agent_max_body_bytes=8192)
    big = payload("user_prompt_submit.json", prompt="x" * 9000)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the cap counts bytes read
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    async with running_agent(settings) as client:
        for content in (big, chunks()):
            answer = await client.post(HOOK_PATH, content=content)
            assert answer.status_code == 413
            assert "MEMQ_AGENT_MAX_BODY_BYTES=8192" in answer.text
    assert await redis.dbsize() == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json at all", "bad Claude Code hook payload"),
        (b'{"hook_event_name": "Stop"}', "missing required field `session_id`"),
        (payload("user_prompt_submit.json", prompt=None), "payload has no `prompt`"),
    ],
)
async def test_a_bad_hook_input_is_400_with_one_line(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, body: bytes, reason: str
) -> None:
    async with running_agent(agent_settings(tmp_path, redis_url)) as client:
        answer = await client.post(HOOK_PATH, content=body)
    assert answer.status_code == 400
    assert answer.text.startswith("memq agent: ")
    assert answer.text.count("\n") == 1
    assert reason in answer.text
    assert await redis.dbsize() == 0


async def test_secrets_are_redacted_before_redis(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    leaky = payload("user_prompt_submit.json", prompt=f"use {SECRET} <private>launch</private>")
    async with running_agent(agent_settings(tmp_path, redis_url)) as client:
        assert (await client.post(HOOK_PATH, content=leaky)).status_code == 200
        await eventually(has_events(redis, 1))
    everything = await stored_bytes(redis)
    assert SECRET.encode() not in everything
    assert b"launch" not in everything


@pytest.mark.parametrize("token", [None, "short"])
def test_beyond_loopback_without_a_long_token_is_refused(token: str | None) -> None:
    check_agent_bind("127.0.0.1", None)
    check_agent_bind("0.0.0.0", TOKEN)
    with pytest.raises(ConfigError, match="MEMQ_AGENT_TOKEN of at least 16 characters"):
        check_agent_bind("0.0.0.0", token)


async def test_a_megabytes_tool_output_is_cut_like_the_command_hooks(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    output = {"stdout": "line of output\n" * 200_000, "stderr": ""}  # 3 MB: prepared in a thread
    big = payload("post_tool_use.json", tool_response=output)
    settings = agent_settings(tmp_path, redis_url, max_event_bytes=64 * 1024)
    async with running_agent(settings) as client:
        assert (await client.post(HOOK_PATH, content=big)).status_code == 200
        await eventually(has_events(redis, 1))
    (entry,) = await redis.xrange(Keys(PREFIX).events(SESSION))
    assert len(entry[1][b"event"]) <= 64 * 1024
    assert b"<elided" in entry[1][b"event"]
