"""The web UI's trust limits: token length, stream cap, bounded replay, ids, redirects, NULs."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis

from tests.support.feed_rows import fake_row, observation, store_rows
from tests.support.ingest import REPO, console_script, subprocess_env
from tests.support.ui_harness import read_events, running_ui, ui_settings
from worker.errors import ConfigError
from worker.fanout.ui.app import check_bind
from worker.fanout.ui.live import REPLAY_MAX
from worker.keys import Keys
from worker.sessions.outbox import Outbox
from worker.storage.sqlite.store import SqliteStore

KEYS = Keys("ui")
TOKEN = "a-long-enough-ui-token"  # 22 characters


async def _announce_fake(redis: aioredis.Redis, store: SqliteStore, numbers: range) -> None:
    """Announce rows as the worker does (XADD + PUBLISH), many in one round trip."""
    pipe = redis.pipeline(transaction=False)
    Outbox(redis, KEYS, store, feed_maxlen=100_000).queue(pipe, [fake_row(n) for n in numbers])
    await pipe.execute()


async def _feed_ids(redis: aioredis.Redis) -> list[str]:
    return [raw.decode() for raw, _ in await redis.xrange(KEYS.feed)]


@pytest.mark.parametrize(
    ("host", "token", "allowed"),
    [
        ("0.0.0.0", "x" * 15, False),
        ("192.168.1.20", "short", False),
        ("0.0.0.0", "x" * 16, True),
        ("127.0.0.1", "short", True),  # loopback: any token, or none
    ],
)
def test_off_loopback_the_token_must_be_16_characters(host: str, token: str, allowed: bool) -> None:
    if allowed:
        check_bind(host, token)
    else:
        with pytest.raises(ConfigError, match="use at least 16"):
            check_bind(host, token)


def test_memq_ui_off_loopback_with_a_short_token_exits_2_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [console_script(), "ui", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        # PYTHONPATH: the script runs this checkout's code, wherever the venv points.
        env=subprocess_env(
            tmp_path, "redis://127.0.0.1:1/0", MEMQ_UI_TOKEN="hunter2", PYTHONPATH=str(REPO)
        ),
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "7-character MEMQ_UI_TOKEN: use at least 16" in done.stderr
    assert "hunter2" not in done.stderr


async def test_past_the_stream_cap_a_stream_gets_a_one_line_503_until_one_closes(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    settings = ui_settings(tmp_path, redis_url, ui_max_streams="2")
    async with running_ui(settings) as url, httpx.AsyncClient(base_url=url) as client:
        async with client.stream("GET", "/events") as one, client.stream("GET", "/events") as two:
            assert (one.status_code, two.status_code) == (200, 200)
            refused = await client.get("/events")
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "5"
            assert refused.json() == {
                "error": "all 2 event streams are open (MEMQ_UI_MAX_STREAMS): retry later"
            }
            assert "\n" not in refused.text
            assert (await client.get("/api/stats")).status_code == 200  # pages still answer
        for _ in range(50):  # the closed streams' slots come back
            async with client.stream("GET", "/events") as again:
                if again.status_code == 200:
                    break
            await asyncio.sleep(0.1)
        assert again.status_code == 200


async def test_a_replay_sends_at_most_replay_max_rows_then_a_reset_and_goes_on_live(
    base_url: str, redis: aioredis.Redis, store: SqliteStore
) -> None:
    await _announce_fake(redis, store, range(1, REPLAY_MAX + 6))
    ids = await _feed_ids(redis)
    async with (
        httpx.AsyncClient(base_url=base_url) as client,
        client.stream("GET", "/events", headers={"Last-Event-ID": "0-0"}) as response,
    ):
        reader = asyncio.create_task(read_events(response, REPLAY_MAX + 2))
        await asyncio.sleep(0.1)
        await _announce_fake(redis, store, range(5000, 5001))  # during or after the replay
        events = await reader
    rows, reset, live = events[:REPLAY_MAX], events[REPLAY_MAX], events[-1]
    assert [e["id"] for e in rows] == ids[:REPLAY_MAX]
    assert reset["event"] == "reset"
    assert reset["id"] == ids[-1]  # a reconnect resumes from the feed's end, not the backlog
    assert json.loads(reset["data"]) == {
        "reason": f"more than {REPLAY_MAX} feed entries since 0-0: reload the page"
    }
    assert (live["event"], json.loads(live["data"])["id"]) == ("observation", 5000)


async def test_a_last_event_id_past_the_feed_end_follows_from_now(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, store: SqliteStore
) -> None:
    await _announce_fake(redis, store, range(1, 3))  # before the UI: not live rows to it
    future = "18446744073709551615-18446744073709551615"  # the largest id Redis takes
    async with (
        running_ui(ui_settings(tmp_path, redis_url)) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
        client.stream("GET", "/events", headers={"Last-Event-ID": future}) as response,
    ):
        assert response.status_code == 200
        reader = asyncio.create_task(read_events(response, 1))
        await asyncio.sleep(0.1)
        await _announce_fake(redis, store, range(3, 4))
        (event,) = await reader
    assert json.loads(event["data"])["id"] == 3


@pytest.mark.parametrize(
    "last_id",
    [
        "99999999999999999999999-0",
        "18446744073709551616-0",  # 2^64
        "0-18446744073709551616",
        "\u0661\u0662-0",  # Arabic-Indic digits: str.isdigit() says yes, Redis says no
        "12",
        "-1-0",
        "1-2-3",
        "1 -2",
        "garbage",
    ],
)
async def test_a_last_event_id_that_is_no_stream_id_is_a_one_line_400(
    base_url: str, redis: aioredis.Redis, store: SqliteStore, last_id: str
) -> None:
    await _announce_fake(redis, store, range(1, 2))
    async with httpx.AsyncClient(base_url=base_url) as client:
        by_query = await client.get("/events", params={"last_event_id": last_id})
        by_header = None
        if last_id.isascii():  # a header carries ASCII
            by_header = await client.get("/events", headers={"Last-Event-ID": last_id})
    for response in filter(None, [by_query, by_header]):
        assert response.status_code == 400
        assert response.json() == {"error": "Last-Event-ID is not a feed id"}


@pytest.mark.parametrize(
    "raw_path",
    [
        b"//evil.example/x?token=" + TOKEN.encode(),
        b"///evil.example/x?token=" + TOKEN.encode(),
        b"//evil.example?project=p&token=" + TOKEN.encode(),
        b"/%2F/evil.example/x?token=" + TOKEN.encode(),
        b"/\\evil.example/x?token=" + TOKEN.encode(),
    ],
)
async def test_the_token_redirect_never_leaves_the_origin(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, raw_path: bytes
) -> None:
    settings = ui_settings(tmp_path, redis_url, ui_token=TOKEN)
    async with running_ui(settings) as url, httpx.AsyncClient() as client:
        response = await client.get(httpx.URL(url).copy_with(raw_path=raw_path))
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith("/")
    assert not location.startswith(("//", "/\\"))
    assert urlsplit(urljoin(url, location)).netloc == urlsplit(url).netloc
    assert "evil.example" in location  # kept as a path on this server, not a host
    assert TOKEN not in location


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("/?q=login%00x", "search"),
        ("/?project=demo%00", "project"),
        ("/api/items?q=%00", "search"),
        ("/api/search?q=login%00x", "search"),
        ("/api/sessions?project=a%00b", "project"),
        ("/sessions/s1%00x", "session id"),
        ("/api/sessions/s1%00x", "session id"),
    ],
)
async def test_a_nul_in_a_query_or_session_id_is_a_one_line_400(
    base_url: str, store: SqliteStore, path: str, what: str
) -> None:
    await store_rows(store, observations=[observation(1, title="login works")])
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.get(path)
    reason = f"the {what} contains a NUL character: remove it"
    assert response.status_code == 400
    if path.startswith("/api/"):
        assert response.json() == {"error": reason}
    else:
        assert response.text == reason


@pytest.mark.parametrize("sid", ["team/alpha", "ci/run/42", "a/"])
async def test_a_session_id_with_a_slash_opens_its_page_from_its_link(
    base_url: str, redis: aioredis.Redis, store: SqliteStore, sid: str
) -> None:
    await store_rows(store, session=sid, observations=[observation(1, session=sid, title="A1")])
    await store_rows(store, session="team", observations=[observation(2, session="team")])
    encoded = sid.replace("/", "%2F")
    async with httpx.AsyncClient(base_url=base_url) as client:
        index = (await client.get("/")).text
        assert f'href="/sessions/{encoded}"' in index
        page = await client.get(f"/sessions/{encoded}")
        timeline = (await client.get(f"/api/sessions/{encoded}")).json()
    assert page.status_code == 200
    assert "A1" in page.text
    assert "observation 2" not in page.text
    assert f'data-events="/events?session={encoded}"' in page.text
    assert [e["row"]["title"] for e in timeline] == ["A1"]


@pytest.mark.parametrize("path", ["/sessions/", "/api/sessions/"])
async def test_an_empty_session_id_is_no_page(base_url: str, path: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        assert (await client.get(path)).status_code == 404


async def test_events_carry_the_row_encoded_afresh_never_the_stored_bytes(
    base_url: str, redis: aioredis.Redis
) -> None:
    row = msgspec.to_builtins(fake_row(7, title="plain"))
    smuggling = {**row, "evil": "x\n\ndata: injected\n\n", "html": "<script>1</script>"}
    # Non-canonical JSON: whitespace and newlines between tokens, escaped letters.
    raw = json.dumps(smuggling, indent=2).replace('"plain"', '"\\u0070lain"').encode()
    await redis.xadd(KEYS.feed, {"payload": raw})
    async with (
        httpx.AsyncClient(base_url=base_url) as client,
        client.stream("GET", "/events", headers={"Last-Event-ID": "0-0"}) as response,
    ):
        text = ""
        async with asyncio.timeout(5):
            async for chunk in response.aiter_text():
                text += chunk
                if text.count("\n\n") >= 2:  # "retry: …" and the one event
                    break
    (event,) = [block for block in text.split("\n\n") if block.startswith("id:")]
    lines = event.split("\n")
    assert [line.split(":", 1)[0] for line in lines] == ["id", "event", "data"]
    data = json.loads(lines[2].removeprefix("data: "))
    assert "evil" not in data
    assert "injected" not in text
    assert data["html"].startswith('<article class="card observation"')  # ours, not theirs
    assert "<script>1" not in text
    assert {k: v for k, v in data.items() if k != "html"} == row
    assert lines[2] == "data: " + msgspec.json.encode({**row, "html": data["html"]}).decode()
