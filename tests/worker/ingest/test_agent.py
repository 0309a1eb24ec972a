"""`memq agent`, the HTTP hook: real uvicorn on 127.0.0.1, real redis-server, real spool."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis

from pipeline.content_hash import compute_observation_content_hash
from pipeline.events import Event, decode_event
from tests.support.ingest import closed_port_url, console_script, stored_bytes, subprocess_env
from tests.support.redis_server import RedisServer
from worker.errors import ConfigError
from worker.ingest.agent import HOOK_PATH, check_agent_bind, run_agent
from worker.ingest.spool import Spool
from worker.keys import Keys
from worker.settings import Secret, Settings
from worker.storage.records import BatchWrite, ObservationRecord
from worker.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.slow  # runs uvicorn, redis-server and the memq console script

DATA = Path(__file__).resolve().parents[2] / "data" / "claude_code"
SESSION = "9f2c1e7a-4b3d-4e8f-a1c2-5d6e7f809a1b"
SECRET = "ghp_R7tY2uI9oP4aS6dF1gH3jK8lZ5xC0vB2nM7q"
TOKEN = "0123456789abcdef0123"
KINDS = [
    ("user_prompt_submit.json", "prompt"),
    ("post_tool_use.json", "tool_call"),
    ("stop.json", "summarize"),
    ("session_end.json", "end"),
]
# Random per event (ids of prompts, stops and ends) or the moment it was recorded.
_VARYING = {"event_id", "occurred_at"}


def _payload(name: str, **changes: Any) -> bytes:
    payload = json.loads((DATA / name).read_text())
    payload.update(changes)
    if payload.get("transcript_path") == "TRANSCRIPT":
        payload["transcript_path"] = str(DATA / "transcript.jsonl")
    return json.dumps(payload).encode()


def _settings(data_dir: Path, redis_url: str, **changes: Any) -> Settings:
    return Settings(redis_url=redis_url, prefix="http", data_dir=str(data_dir), **changes)


@asynccontextmanager
async def _agent(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The endpoint on a free loopback port, and a client whose base URL is the hook's URL."""
    stop = asyncio.Event()
    listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_agent(settings, host="127.0.0.1", port=0, stop=stop, on_listening=listening.set_result)
    )
    await asyncio.wait([task, listening], timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        await task  # raises why it did not start
    url = listening.result()
    try:
        async with httpx.AsyncClient(base_url=url.removesuffix(HOOK_PATH), timeout=10) as client:
            yield client
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def _stream(client: aioredis.Redis, prefix: str) -> list[Event]:
    entries = await client.xrange(Keys(prefix).events(SESSION))
    return [decode_event(fields[b"event"]) for _, fields in entries]


async def _eventually(check: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def _comparable(event: Event) -> dict[str, Any]:
    fields = msgspec.to_builtins(event)
    return {k: v for k, v in fields.items() if k not in _VARYING}


def _command_hook(payload: bytes, data_dir: Path, redis_url: str, prefix: str) -> str:
    done = subprocess.run(
        [console_script(), "hook", "claude-code"],
        input=payload,
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
    async with _agent(_settings(tmp_path, redis_url)) as client:
        for name, _ in KINDS:
            answer = await client.post(HOOK_PATH, content=_payload(name))
            assert (answer.status_code, answer.text) == (200, "")
        await _eventually(lambda: _count(redis, "http", len(KINDS)))
    for name, _ in KINDS:
        _command_hook(_payload(name), tmp_path, redis_url, "cmd")
    by_http, by_command = await _stream(redis, "http"), await _stream(redis, "cmd")
    assert [type(e).__struct_config__.tag for e in by_http] == [kind for _, kind in KINDS]
    assert [_comparable(e) for e in by_http] == [_comparable(e) for e in by_command]
    assert not Spool(tmp_path / "spool", 1).pending()


async def _count(redis: aioredis.Redis, prefix: str, n: int) -> bool:
    return len(await _stream(redis, prefix)) >= n


async def test_session_start_answers_the_command_hooks_context(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    await _seed(tmp_path / "memq.db")
    payload = _payload("session_start.json")
    printed = _command_hook(payload, tmp_path, redis_url, "cmd")
    assert "Login test fixed" in json.loads(printed)["hookSpecificOutput"]["additionalContext"]
    async with _agent(_settings(tmp_path, redis_url)) as client:
        answer = await client.post(HOOK_PATH, content=payload)
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
                ObservationRecord(
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


async def test_redis_down_answers_at_once_spools_and_flushes_exactly_once_when_back(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "redis").start()
    try:
        async with _agent(_settings(tmp_path / "data", server.url)) as client:
            server.stop()
            for name, _ in KINDS:
                started = time.monotonic()
                answer = await client.post(HOOK_PATH, content=_payload(name))
                assert answer.status_code == 200
                assert time.monotonic() - started < 0.1
            spool = Spool(tmp_path / "data" / "spool", 1 << 30)

            async def spooled() -> bool:
                return spool.status().events == len(KINDS)

            await _eventually(spooled)
            server.start()
            redis = aioredis.Redis.from_url(server.url)
            try:
                await _eventually(lambda: _count(redis, "http", len(KINDS)))
                await _eventually(lambda: _spool_empty(spool))
                # Published after the spooled events, not before them.
                answer = await client.post(HOOK_PATH, content=_payload("stop.json"))
                assert answer.status_code == 200
                await _eventually(lambda: _count(redis, "http", len(KINDS) + 1))
                await asyncio.sleep(1.0)  # time for a second flush, which must add nothing
                kinds = [type(e).__struct_config__.tag for e in await _stream(redis, "http")]
                assert kinds == [kind for _, kind in KINDS] + ["summarize"]
            finally:
                await redis.aclose()
    finally:
        server.stop()


async def _spool_empty(spool: Spool) -> bool:
    return not spool.pending()


async def test_a_redis_that_never_was_costs_no_time_and_spools(tmp_path: Path) -> None:
    async with _agent(_settings(tmp_path, closed_port_url())) as client:
        started = time.monotonic()
        answer = await client.post(HOOK_PATH, content=_payload("post_tool_use.json"))
        assert (answer.status_code, time.monotonic() - started < 0.1) == (200, True)
        spool = Spool(tmp_path / "spool", 1 << 30)

        async def spooled() -> bool:
            return spool.status().events == 1

        await _eventually(spooled)


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": TOKEN}]
)
async def test_a_missing_or_wrong_token_is_401_and_records_nothing(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, headers: dict[str, str]
) -> None:
    settings = _settings(tmp_path, redis_url, agent_token=Secret(TOKEN))
    async with _agent(settings) as client:
        answer = await client.post(HOOK_PATH, content=_payload("stop.json"), headers=headers)
        assert answer.status_code == 401
        assert answer.text.startswith("memq agent: ")
        assert answer.text.count("\n") == 1
        good = {"Authorization": f"Bearer {TOKEN}"}
        answer = await client.post(HOOK_PATH, content=_payload("stop.json"), headers=good)
        assert answer.status_code == 200
        await _eventually(lambda: _count(redis, "http", 1))
    assert len(await _stream(redis, "http")) == 1


async def test_an_oversize_body_is_413(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    settings = _settings(tmp_path, redis_url, agent_max_body_bytes=8192)
    big = _payload("user_prompt_submit.json", prompt="x" * 9000)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the cap counts bytes read
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    async with _agent(settings) as client:
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
        (_payload("user_prompt_submit.json", prompt=None), "payload has no `prompt`"),
    ],
)
async def test_a_bad_hook_input_is_400_with_one_line(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, body: bytes, reason: str
) -> None:
    async with _agent(_settings(tmp_path, redis_url)) as client:
        answer = await client.post(HOOK_PATH, content=body)
    assert answer.status_code == 400
    assert answer.text.startswith("memq agent: ")
    assert answer.text.count("\n") == 1
    assert reason in answer.text
    assert await redis.dbsize() == 0


async def test_secrets_are_redacted_before_redis(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    leaky = _payload("user_prompt_submit.json", prompt=f"use {SECRET} <private>launch</private>")
    async with _agent(_settings(tmp_path, redis_url)) as client:
        assert (await client.post(HOOK_PATH, content=leaky)).status_code == 200
        await _eventually(lambda: _count(redis, "http", 1))
    everything = await stored_bytes(redis)
    assert SECRET.encode() not in everything
    assert b"launch" not in everything


@pytest.mark.parametrize("token", [None, "short"])
def test_beyond_loopback_without_a_long_token_is_refused(token: str | None) -> None:
    check_agent_bind("127.0.0.1", None)
    check_agent_bind("0.0.0.0", TOKEN)
    with pytest.raises(ConfigError, match="MEMQ_AGENT_TOKEN of at least 16 characters"):
        check_agent_bind("0.0.0.0", token)
