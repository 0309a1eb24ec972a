"""The operator panel's cost charts in a real headless Chromium: drawn, and still one
project's after the panel refreshes itself."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from arq.connections import ArqRedis
from playwright.async_api import Browser, expect

from tests.e2e.test_ui_browser import _fix_browser, _screenshot  # noqa: F401
from tests.support.feed_rows import observation
from tests.support.ui_harness import running_ui, ui_settings
from worker.keys import Keys
from worker.storage.records import BatchWrite, TokenUsage
from worker.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.slow  # a browser


async def _spend(store: SqliteStore, project: str, tokens: int, observations: int) -> None:
    now = datetime.now(UTC)
    sid = f"s-{project}"
    usage = TokenUsage(memory_session_id=sid, project=project, provider="anthropic", model="m",
                       input_tokens=tokens, cached_input_tokens=tokens // 2,
                       output_tokens=tokens // 10, created_at=now)  # fmt: skip
    rows = [
        msgspec.structs.replace(
            observation(n, project=project), memory_session_id=sid, created_at=now
        )
        for n in range(observations)
    ]
    await store.write_batch(BatchWrite(memory_session_id=sid, project=project, fence=1,
                                       event_ids=[], observations=rows, usage=[usage]))  # fmt: skip


async def test_the_panel_draws_one_projects_cost_and_keeps_it_on_refresh(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, browser: Browser
) -> None:
    settings = ui_settings(tmp_path, redis_url)
    keys = Keys(settings.prefix)
    store = SqliteStore(settings.data_path / "memq.db")
    await _spend(store, "shop", 6000, 2)
    await _spend(store, "blog", 900, 1)
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        async with running_ui(settings) as url:
            await page.goto(f"{url}?project=shop")
            bars = page.locator('figure[data-chart="per-observation"] > svg rect')
            await expect(bars).to_have_count(1)
            assert await bars.get_attribute("data-value") == "3300.0"  # (6000 + 600) / 2
            stacked = page.locator('figure[data-chart="tokens"] > svg')
            await expect(stacked).to_be_visible()
            box = await stacked.bounding_box()
            assert box is not None
            assert box["width"] > 100  # drawn at its size, not collapsed
            assert box["height"] > 40
            await expect(page.locator("#stats dt", has_text="Observer cost")).to_have_text(
                "Observer cost of shop"
            )
            # A refresh (every 5 s) asks for the same project's panel.
            await arq_redis.xadd(keys.dead, {"reason": "poison"})
            await expect(page.locator('dd[data-stat="dead"]')).to_have_text("1", timeout=8000)
            await expect(page.locator("#stats dt", has_text="Observer cost")).to_have_text(
                "Observer cost of shop"
            )
            await expect(bars).to_have_count(1)
            await _screenshot(page, tmp_path, "ui-cost-panel.png")
        assert errors == []
    finally:
        await page.close()
        await store.aclose()
