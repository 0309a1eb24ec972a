"""`memq mcp` answers stay bounded: a huge project name, a search that would run for minutes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from arq.connections import ArqRedis
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

from tests.support.fake_observer import FakeObserver, Reply
from tests.support.ingest import REPO, console_script, subprocess_env
from tests.support.worker_harness import drain, make_settings, publish, running_runtime, tool_call

pytestmark = pytest.mark.slow

OBSERVATION = (
    "<observation><type>discovery</type><title>Cache TTL is 300 s</title>"
    "<narrative>The product cache lives in settings.py.</narrative></observation>"
)


@asynccontextmanager
async def _mcp(tmp_path: Path, **extra: str) -> AsyncIterator[Client]:
    env = subprocess_env(tmp_path, **{"MEMQ_CHROMA": "off", "PYTHONPATH": str(REPO), **extra})
    params = StdioServerParameters(
        command=console_script(), args=["mcp"], env=env, cwd=str(tmp_path)
    )
    with (tmp_path / "mcp.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            yield client


async def _answer(client: Client, tool: str, **arguments: object) -> tuple[bool, str]:
    result = await client.call_tool(tool, dict(arguments))
    assert isinstance(result, CallToolResult)
    (block,) = result.content
    assert isinstance(block, TextContent)
    return bool(result.is_error), block.text


async def test_context_for_a_100000_character_project_stays_under_the_cap(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    longest = "p" * 500  # the longest project an event may name
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    fake_observer.script(Reply(text=OBSERVATION))
    await publish(arq_redis, settings, tool_call("s1", 1, project=longest))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    async with _mcp(tmp_path, MEMQ_MCP_MAX_CHARS="1000") as client:
        missing_error, missing = await _answer(client, "context", project="q" * 100_000)
        stored_error, stored = await _answer(client, "context", project=longest)
        # The server still answers the next call.
        after_error, after = await _answer(client, "search", query="cache")
    assert not missing_error
    assert missing.startswith("memq has nothing stored for project 'qqq")
    assert len(missing) < 300
    assert not stored_error
    assert "Cache TTL is 300 s" in stored
    assert len(stored) <= 1000
    assert not after_error
    assert "Cache TTL is 300 s" in after
