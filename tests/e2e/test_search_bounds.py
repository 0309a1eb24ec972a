"""Every search is bounded in time and work: the CLI, the web UI and `memq mcp`, on SQLite and
PostgreSQL. A stored narrative of 1.4 MB of `<a>` tags once made `memq search '"a" OR *'` run
for over ten minutes and blocked every later MCP call."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

from tests.support.feed_rows import observation, store_rows
from tests.support.ingest import REPO, console_script, subprocess_env
from tests.support.postgres_server import PostgresServer, postgres_server_fixture  # noqa: F401
from tests.support.ui_harness import running_ui, ui_settings
from worker.storage.index_records import TextFilter
from worker.storage.postgres.store import PostgresStore
from worker.storage.protocol import SearchTimeoutError
from worker.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.slow

QUERY = '"a" OR *'
GIANT = "<a>" * 470_000  # 1.4 MB


async def _fill(store: SqliteStore | PostgresStore, *, slow_rows: int) -> None:
    """The giant row, a findable one, and rows whose highlighted snippets take long each."""
    rows = [
        observation(0, title="giant", narrative=GIANT),
        observation(1, title="Cache TTL is 300 s", narrative="The cache lives in settings."),
    ]
    rows += [
        observation(i + 2, title=f"tags {i}", narrative="<a> " * 5_000) for i in range(slow_rows)
    ]
    await store_rows(store, observations=rows)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(tmp_path, **{"MEMQ_CHROMA": "off", "PYTHONPATH": str(REPO), **extra})


def _search(
    tmp_path: Path, query: str, **extra: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [console_script(), "search", query],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(tmp_path, **extra),
    )
    return done, time.monotonic() - started


async def test_a_giant_row_alone_is_searched_quickly_its_snippet_the_start_of_its_text(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "memq.db")
    await _fill(store, slow_rows=0)
    await store.aclose()
    done, took_s = await asyncio.to_thread(_search, tmp_path, QUERY)
    assert done.returncode == 0, done.stderr
    assert "giant" in done.stdout
    assert took_s < 20


async def test_cli_search_past_the_timeout_answers_one_line(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memq.db")
    await _fill(store, slow_rows=60)  # unbounded, 30 such rows took 12-13 s on this machine
    await store.aclose()
    done, took_s = await asyncio.to_thread(_search, tmp_path, QUERY, MEMQ_SEARCH_TIMEOUT_S="1")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "memq: search stopped after 1s (MEMQ_SEARCH_TIMEOUT_S): narrow the query (fewer or"
        " rarer words)"
    ]
    assert took_s < 15  # the CLI's start-up (SDK imports) plus the 1 s bound
    # Nothing else was lost: a narrower query still answers.
    ok, _ = await asyncio.to_thread(_search, tmp_path, "cache", MEMQ_SEARCH_TIMEOUT_S="1")
    assert ok.returncode == 0
    assert "Cache TTL is 300 s" in ok.stdout


@asynccontextmanager
async def _mcp(tmp_path: Path, **extra: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=console_script(), args=["mcp"], env=_env(tmp_path, **extra), cwd=str(tmp_path)
    )
    with (tmp_path / "mcp.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
            yield client


def _text(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


async def test_mcp_search_past_the_timeout_is_a_one_line_error_and_later_calls_answer(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "memq.db")
    await _fill(store, slow_rows=60)
    await store.aclose()
    async with _mcp(tmp_path, MEMQ_SEARCH_TIMEOUT_S="1") as client:
        started = time.monotonic()
        slow = await client.call_tool("search", {"query": QUERY})
        slow_s = time.monotonic() - started
        started = time.monotonic()
        after = await client.call_tool("search", {"query": "cache"})
        after_s = time.monotonic() - started
    assert slow.is_error
    assert _text(slow) == (  # the MCP SDK's prefix, then memq's one line
        "Error executing tool search: search stopped after 1s (MEMQ_SEARCH_TIMEOUT_S):"
        " narrow the query (fewer or rarer words)"
    )
    assert slow_s < 5
    assert not after.is_error
    assert "Cache TTL is 300 s" in _text(after)
    assert after_s < 5


async def test_ui_search_past_the_timeout_answers_503_with_one_line(
    tmp_path: Path, redis_url: str
) -> None:
    settings = ui_settings(tmp_path, redis_url, search_timeout_s="1")
    store = SqliteStore(settings.data_path / "memq.db")
    await _fill(store, slow_rows=60)
    await store.aclose()
    redis = aioredis.Redis.from_url(redis_url)
    await redis.aclose()
    async with running_ui(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        started = time.monotonic()
        api = await client.get("/api/search", params={"q": QUERY})
        page = await client.get("/", params={"q": QUERY})
        took_s = time.monotonic() - started
        found = await client.get("/api/search", params={"q": "cache"})
    assert api.status_code == 503
    assert api.json() == {
        "error": "search stopped after 1s (MEMQ_SEARCH_TIMEOUT_S): narrow the query (fewer or"
        " rarer words)"
    }
    assert page.status_code == 503
    assert page.text.count("\n") == 1
    assert took_s < 8
    assert found.status_code == 200
    assert "Cache TTL is 300 s" in found.text


async def test_postgres_search_is_stopped_by_statement_timeout(
    postgres_server: PostgresServer,
) -> None:
    url = await postgres_server.emptied_database()
    store = PostgresStore(url, search_timeout_s=0.05)
    try:
        # ("a" is a stop word in PostgreSQL's configuration: these rows repeat a real word.)
        rows = [observation(i, title=f"tags {i}", narrative="anchor " * 20_000) for i in range(60)]
        await store_rows(store, observations=[*rows, observation(99, title="Cache TTL is 300 s")])
        started = time.monotonic()
        with pytest.raises(SearchTimeoutError, match=r"search stopped after 0\.05s"):
            await store.search_text('"anchor"', TextFilter(), 50)
        assert time.monotonic() - started < 3
        # The pooled connection's own timeout came back: a narrow search still answers.
        hits = await store.search_text('"cache"', TextFilter(), 50)
        assert len(hits) == 1
    finally:
        await store.aclose()
