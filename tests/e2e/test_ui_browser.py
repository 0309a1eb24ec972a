"""The web UI in a real headless Chromium: a published event appears live, is found, opens."""

from __future__ import annotations

import re
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from arq.connections import ArqRedis
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.support.fake_observer import FakeObserver
from tests.support.feed_rows import announce, observation, store_rows
from tests.support.feed_rows import prompt as prompt_record
from tests.support.ui_harness import running_ui, ui_settings
from tests.support.worker_harness import drain, make_settings, prompt, running_runtime, tool_call
from worker.ingest.producer import Producer, prepare_event
from worker.keys import Keys
from worker.storage.sqlite.store import SqliteStore

pytestmark = pytest.mark.slow  # a browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@pytest.fixture(name="browser")
async def _fix_browser() -> AsyncIterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} missing: scripts/test installs Debian's chromium")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


async def _screenshot(page: Page, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    await page.screenshot(path=str(shot), full_page=True)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / name)


async def test_a_published_event_appears_live_is_found_and_opens_its_session(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    browser: Browser,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    async with running_ui(settings) as url:
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(url)
        await expect(page.locator("body")).to_have_attribute("data-live", "on", timeout=5000)

        # Publish through the producer; the worker stores and announces; the card shows up.
        producer = Producer(arq_redis, settings)
        call = tool_call("browser-s1", 2, tool_input={"command": "grep -rn zebrafish src"})
        await producer.publish(
            prepare_event(prompt("browser-s1", 1, "find the zebrafish crash"), settings)
        )
        await producer.publish(prepare_event(call, settings))
        async with running_runtime(settings, arq_redis) as rt:
            assert await drain(rt, arq_redis) >= 1
        card = page.locator("#feed article.card", has_text="zebrafish").first
        await expect(card).to_be_visible(timeout=2000)  # live, no reload
        title = await card.locator(".title").inner_text()
        assert "zebrafish" in title
        await expect(page.locator("#live-status")).to_contain_text("1 new item")

        # Stored markup arrives live as text; nothing in it runs.
        store = SqliteStore(settings.data_path / "memq.db")
        rows = await store_rows(store, session="browser-s2", observations=[
            observation(9, session="browser-s2", title=HOSTILE)])  # fmt: skip
        await announce(arq_redis, Keys(settings.prefix), store, rows)
        await store.aclose()
        hostile = page.locator("#feed .title", has_text="window.__pwned=2")
        await expect(hostile).to_have_text(HOSTILE, timeout=2000)
        assert await page.evaluate("window.__pwned") is None
        await _screenshot(page, tmp_path, "ui-live.png")

        # Search for it (full text through the store), then open its session.
        await page.fill("#q", "zebrafish")
        await page.press("#q", "Enter")
        await expect(page.locator("#feed-title")).to_contain_text("zebrafish")
        found = page.locator("#feed article.card")
        await expect(found).to_have_count(1)
        await expect(found.locator(".title")).to_have_text(title)
        await found.locator("a.session").click()
        await expect(page.locator("#session-title")).to_contain_text("browser-s1")
        timeline = page.locator(".timeline > article")
        await expect(timeline.first).to_contain_text("find the zebrafish crash")
        await expect(timeline.nth(1)).to_contain_text(title)
        await _screenshot(page, tmp_path, "ui-session.png")
        assert errors == []
        await page.close()


async def test_a_session_page_shows_its_own_new_rows_live_and_resumes_after_a_drop(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, browser: Browser
) -> None:
    settings = ui_settings(tmp_path, redis_url)
    keys = Keys(settings.prefix)
    store = SqliteStore(settings.data_path / "memq.db")

    async def add(session: str, n: int, title: str) -> None:
        rows = await store_rows(
            store, session=session, observations=[observation(n, session=session, title=title)]
        )
        await announce(arq_redis, keys, store, rows)

    await store_rows(store, session="live-s1", prompts=[prompt_record(1, "tidy the parser",
                     session="live-s1")])  # fmt: skip
    await add("live-s1", 2, "Stored before the page opened")
    port = _free_port()
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    timeline = page.locator("#feed.timeline > article")
    status = page.locator("#live-status")
    try:
        async with running_ui(settings, port=port) as url:
            await page.goto(f"{url}sessions/live-s1")
            await expect(page.locator("body")).to_have_attribute("data-live", "on", timeout=5000)
            await expect(status).to_have_attribute("aria-live", "polite")
            await expect(status).to_contain_text("Live")
            await expect(timeline).to_have_count(2)

            # Another session's row first, then this session's: only the latter shows, as text.
            await add("live-s2", 3, "Row of another session")
            await add("live-s1", 4, HOSTILE)
            await expect(timeline).to_have_count(3, timeout=2000)  # live, no reload
            await expect(timeline.nth(2).locator(".title")).to_have_text(HOSTILE)
            await expect(timeline.nth(2)).to_have_class(re.compile(r"\bcard\b"))
            await expect(status).to_contain_text("1 new item")
            assert await page.evaluate("window.__pwned") is None

        # The server is gone: the page says so, and rows stored meanwhile are not lost.
        await expect(page.locator("body")).to_have_attribute(
            "data-live", "reconnecting", timeout=5000
        )
        await expect(status).to_contain_text("Reconnecting")
        await add("live-s1", 5, "Stored while the page was cut off")
        await add("live-s2", 6, "Another session while cut off")
        async with running_ui(settings, port=port):
            await expect(status).to_contain_text("Live", timeout=10_000)
            await expect(timeline).to_have_count(4, timeout=5000)
            await add("live-s1", 7, "Stored after the reconnect")
            await expect(timeline).to_have_count(5, timeout=2000)
            titles = await timeline.locator(".title").all_inner_texts()
            assert titles == [
                "Stored before the page opened",
                HOSTILE,
                "Stored while the page was cut off",
                "Stored after the reconnect",
            ]  # in order, each once: nothing repeated or skipped across the reconnect
            await expect(page.locator("#feed")).not_to_contain_text(
                re.compile("another session", re.I)
            )
            await expect(status).to_contain_text("Live. 3 new items")
            await _screenshot(page, tmp_path, "ui-session-live.png")
        assert errors == []
    finally:
        await page.close()
        await store.aclose()


async def test_a_filtered_list_gets_only_its_rows_live_and_the_panel_refreshes(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, browser: Browser
) -> None:
    settings = ui_settings(tmp_path, redis_url)
    keys = Keys(settings.prefix)
    store = SqliteStore(settings.data_path / "memq.db")
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        async with running_ui(settings) as url:
            await page.goto(f"{url}?project=shop")
            await expect(page.locator("body")).to_have_attribute("data-live", "on", timeout=5000)
            await expect(page.locator('dd[data-stat="dead"]')).to_have_text("0")
            for n, project in enumerate(["blog", "shop"], 1):
                rows = await store_rows(store, project=project, observations=[
                    observation(n, project=project, title=f"{project} row")])  # fmt: skip
                await announce(arq_redis, keys, store, rows)
            cards = page.locator("#feed article.card")
            await expect(cards).to_have_count(1, timeout=2000)  # the server sent only shop's
            await expect(cards.locator(".title")).to_have_text("shop row")
            await expect(page.locator("#live-status")).to_contain_text("1 new item")

            # The operator panel refreshes itself (every 5 s) from the server's fragment.
            await arq_redis.xadd(keys.dead, {"reason": "poison"})
            await expect(page.locator('dd[data-stat="dead"]')).to_have_text("1", timeout=8000)
        assert errors == []
    finally:
        await page.close()
        await store.aclose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
