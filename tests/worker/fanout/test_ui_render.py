"""One renderer: the page's card and the live feed's card are the same escaped HTML."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
import redis.asyncio as aioredis

from tests.support.feed_rows import announce, observation, store_rows, summary
from tests.support.ui_harness import read_events
from worker.keys import Keys
from worker.storage.records import StoredRow
from worker.storage.sqlite.store import SqliteStore

KEYS = Keys("ui")
HOSTILE_TITLE = "<script>window.__pwned=1</script>"
HOSTILE_PROJECT = '"><img src=x onerror=alert(1)>'


def _card(page: str, row: StoredRow) -> str:
    """The <article> of `row` as the page holds it (cards do not nest)."""
    found = re.search(rf'<article class="card [^"]*" id="row-{row.kind}-{row.id}".*?</article>',
                      page, re.DOTALL)  # fmt: skip
    assert found is not None, f"no card for {row.kind} {row.id} in the page"
    return found.group(0)


async def _live_events(base_url: str, count: int, query: str = "") -> list[dict[str, str]]:
    """`count` events replayed from the feed's start (`query` adds /events filters)."""
    async with (
        httpx.AsyncClient(base_url=base_url) as client,
        client.stream("GET", f"/events{query}", headers={"Last-Event-ID": "0-0"}) as response,
    ):
        assert response.status_code == 200
        return await read_events(response, count)


async def test_a_hostile_title_is_escaped_alike_in_the_page_and_the_live_card(
    base_url: str, redis: aioredis.Redis, store: SqliteStore
) -> None:
    rows = await store_rows(
        store,
        project=HOSTILE_PROJECT,
        observations=[
            observation(1, project=HOSTILE_PROJECT, title=HOSTILE_TITLE,
                        narrative="<b>bold</b>\nnext line", facts=["a & b"], files=["<x>.py"])
        ],
        summaries=[summary(2, HOSTILE_TITLE, project=HOSTILE_PROJECT)],
    )  # fmt: skip
    await announce(redis, KEYS, store, rows)
    events = await _live_events(base_url, 2)
    async with httpx.AsyncClient(base_url=base_url) as client:
        pages = [(await client.get(path)).text for path in ("/", "/sessions/s1")]
    assert [e["event"] for e in events] == ["observation", "summary"]
    for row, event in zip(rows, events, strict=True):
        live = json.loads(event["data"])["html"]
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in live
        assert "<script" not in live
        assert "<img" not in live
        assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in live  # in attributes too
        for page in pages:
            assert _card(page, row) == live
            assert "<script>window" not in page
    narrative = '<p class="narrative">&lt;b&gt;bold&lt;/b&gt;\nnext line</p>'
    assert narrative in json.loads(events[0]["data"])["html"]  # its line breaks kept


async def test_a_live_card_arrives_as_the_page_shows_it_after_a_reload(
    base_url: str, redis: aioredis.Redis, store: SqliteStore
) -> None:
    async with (
        httpx.AsyncClient(base_url=base_url) as client,
        client.stream("GET", "/events") as response,
    ):
        reader = asyncio.create_task(read_events(response, 1))
        await asyncio.sleep(0.1)
        rows = await store_rows(store, observations=[observation(3, title=HOSTILE_TITLE)])
        await announce(redis, KEYS, store, rows)
        (event,) = await reader
        page = (await client.get("/")).text
    assert json.loads(event["data"])["html"] == _card(page, rows[0])


FILTERED = [  # session, project, type, title
    ("s1", "shop", "bugfix", "shop bugfix"),
    ("s1", "shop", "discovery", "shop discovery"),
    ("s2", "blog", "discovery", "blog discovery"),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ["shop bugfix", "shop discovery", "blog discovery", "wrap up"]),
        ("?project=shop", ["shop bugfix", "shop discovery"]),
        ("?type=discovery", ["shop discovery", "blog discovery"]),
        ("?type=summary", ["wrap up"]),
        ("?session=s2&type=discovery", ["blog discovery"]),
        ("?project=shop&type=discovery&q=ignored", ["shop discovery"]),
    ],
)
async def test_the_live_feed_applies_the_list_filters_on_the_server(
    base_url: str, redis: aioredis.Redis, store: SqliteStore, query: str, expected: list[str]
) -> None:
    for n, (session, project, kind, title) in enumerate(FILTERED, 1):
        rows = await store_rows(store, session=session, project=project, observations=[
            observation(n, session=session, project=project, type=kind, title=title)])  # fmt: skip
        await announce(redis, KEYS, store, rows)
    wrap_up = summary(9, "wrap up", session="s2", project="blog")
    rows = await store_rows(store, session="s2", project="blog", summaries=[wrap_up])
    await announce(redis, KEYS, store, rows)
    events = await _live_events(base_url, len(expected), query)
    titles = [json.loads(e["data"]).get("title") or json.loads(e["data"])["request"]
              for e in events]  # fmt: skip
    assert titles == expected


@pytest.mark.parametrize(
    ("query", "events_url", "search"),
    [
        ("", "/events", None),
        ("?project=shop&type=bugfix&session=&q=", "/events?project=shop&type=bugfix", None),
        ("?session=s2&q=login", "/events?session=s2", "on"),
        ("?session=has+space", None, None),  # no event carries such an id: nothing to follow
    ],
)
async def test_the_index_page_follows_the_feed_its_filters_select(
    base_url: str, query: str, events_url: str | None, search: str | None
) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        page = (await client.get(f"/{query}")).text
    feed = re.search(r"<div id=\"feed\"[^>]*>", page)
    assert feed is not None
    tag = feed.group(0).replace("&amp;", "&")
    assert (f'data-events="{events_url}"' in tag) if events_url else ("data-events" not in tag)
    assert ('data-search="on"' in tag) == (search == "on")


async def test_the_operator_panel_refreshes_from_the_same_fragment(
    base_url: str, redis: aioredis.Redis
) -> None:
    await redis.hset(KEYS.outcomes, mapping={"stored": 3, "dead:poison": 1})
    async with httpx.AsyncClient(base_url=base_url) as client:
        fragment = await client.get("/partials/stats")
        page = (await client.get("/")).text
    assert fragment.headers["content-type"].startswith("text/html")
    outcomes = re.search(r'<dd data-stat="outcomes">([^<]*)</dd>', fragment.text)
    assert outcomes is not None
    assert "stored 3" in outcomes.group(1)
    assert "poison" not in outcomes.group(1)  # per-category counts stay out of the panel
    panel = re.search(r'<dl id="stats">\n(.*?)</dl>', page, re.DOTALL)
    assert panel is not None
    assert panel.group(1) == fragment.text


@pytest.mark.parametrize(
    ("path", "media", "text"),
    [("/static/app.css", "text/css", "prefers-color-scheme"),
     ("/static/app.js", "javascript", "new EventSource(")],
)  # fmt: skip
async def test_the_stylesheet_and_script_are_served_as_files(
    base_url: str, path: str, media: str, text: str
) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.get(path)
        missing = await client.get("/static/nothing.js")
    assert response.status_code == 200
    assert media in response.headers["content-type"]
    assert text in response.text
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert missing.status_code == 404
