"""`memq telegram` against the loopback fake Bot API: filter, allow-list, split, limits, restart."""

from __future__ import annotations

import asyncio
import html
import itertools
import logging
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import pytest
import redis.asyncio as aioredis

from tests.support.fake_telegram import Failure, FakeTelegram, check_html
from tests.support.fake_telegram import fake_telegram_fixture as fake_telegram_fixture
from tests.support.feed_rows import announce, fake_row, observation, store_rows
from tests.support.ingest import REPO, console_script, subprocess_env
from worker.backoff import Backoff
from worker.cli.commands.telegram import TelegramTuning, run_telegram
from worker.errors import ConfigError
from worker.fanout.telegram.api import bot_token
from worker.fanout.telegram.bot import allowed_chats
from worker.fanout.telegram.format import RowFilter, render_row, telegram_length
from worker.keys import Keys
from worker.masked_text import mask_token
from worker.settings import Settings, load_settings
from worker.storage.records import StoredRow
from worker.storage.sqlite.store import SqliteStore

CHATS = ("111", "-100222")
FAST = TelegramTuning(
    per_chat_s=0.02,
    group_per_min=0,
    backoff=Backoff(base_s=0.01, max_s=60.0, jitter=False),
    poll_timeout_s=1,
    start="beginning",
)
EMOJI = {"security_alert": "⚠", "discovery": "○"}


def _settings(tmp_path: Path, redis_url: str, fake: FakeTelegram, **extra: str) -> Settings:
    env = {
        "MEMQ_DATA_DIR": str(tmp_path),
        "MEMQ_REDIS_URL": redis_url,
        "MEMQ_PREFIX": "tg",
        "MEMQ_TELEGRAM_TOKEN": fake.token,
        "MEMQ_TELEGRAM_API_URL": fake.url,
        "MEMQ_TELEGRAM_CHAT_IDS": ",".join(CHATS),
        **{f"MEMQ_{k.upper()}": v for k, v in extra.items()},
    }
    return load_settings(env)


@asynccontextmanager
async def _running(settings: Settings, tuning: TelegramTuning = FAST) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(run_telegram(settings, stop=stop, tuning=tuning))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def _sent(fake: FakeTelegram, count: int, timeout_s: float = 10.0) -> list[str]:
    sent = await asyncio.to_thread(fake.wait_for_sent, count, timeout_s)
    return [f"{m.chat_id}:{m.text}" for m in sent]


def _row_ids(fake: FakeTelegram, chat: str) -> list[int]:
    found = (re.search(r"· #(\d+)$", m.text) for m in fake.sent if m.chat_id == chat)
    return [int(m[1]) for m in found if m]


@pytest.mark.parametrize(
    ("types", "concepts", "row", "sent"),
    [
        ("security_alert,security_note", "", fake_row(1, type="security_alert"), True),
        ("security_alert,security_note", "", fake_row(1, type="discovery"), False),
        ("security_alert", "gotcha", fake_row(1, type="discovery", concepts=["gotcha"]), True),
        ("security_alert", "gotcha", fake_row(1, type="discovery", concepts=["pattern"]), False),
        ("*", "", fake_row(1, type="discovery"), True),
        ("*", "", fake_row(1, kind="summary", type=None, request="r"), True),
        ("security_alert", "", fake_row(1, kind="summary", type=None, request="r"), False),
        ("summary", "", fake_row(1, kind="summary", type=None, request="r"), True),
    ],
)
def test_rows_are_filtered_by_type_or_concept(
    types: str, concepts: str, row: StoredRow, sent: bool
) -> None:
    assert RowFilter.parse(types, concepts).matches(row) is sent


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"MEMQ_TELEGRAM_CHAT_IDS": ""}, "MEMQ_TELEGRAM_CHAT_IDS is empty"),
        ({"MEMQ_TELEGRAM_CHAT_IDS": "111,me"}, "holds 'me'"),
        ({"MEMQ_TELEGRAM_TOKEN": ""}, "MEMQ_TELEGRAM_TOKEN is not set"),
        ({"MEMQ_TELEGRAM_TYPES": "*,bugfix"}, "`*` or a list"),
    ],
)
def test_bad_telegram_settings_are_refused_with_the_variable_named(
    variables: dict[str, str], message: str
) -> None:
    env = {"MEMQ_TELEGRAM_TOKEN": "1:x", "MEMQ_TELEGRAM_CHAT_IDS": "111", **variables}
    settings = load_settings({k: v for k, v in env.items() if v})

    def check_all() -> None:
        allowed_chats(settings)
        bot_token(settings)
        RowFilter.parse(settings.telegram_types, settings.telegram_concepts)

    with pytest.raises(ConfigError, match=re.escape(message)):
        check_all()


@pytest.mark.parametrize("limit", [200, 1000, 4096])
def test_split_messages_stay_under_the_limit_keep_markup_valid_and_lose_no_text(limit: int) -> None:
    narrative = " ".join(f"w{i}<&>" for i in range(2500)) + " " + "x" * 3000
    row = fake_row(7, title="A & <b>", narrative=narrative, facts=["f1 < f2", "&amp; stays"])
    parts = render_row(row, EMOJI, limit)
    assert len(parts) > 1
    for part in parts:
        assert telegram_length(part) <= limit
        assert check_html(part) is None
    bodies = [re.sub(r"^<i>\(\d+/\d+\)</i>\n", "", p) for p in parts]
    text = html.unescape(re.sub(r"<[^>]*>", "", "\n".join(bodies)))
    assert "".join(narrative.split()) in "".join(text.split())
    assert parts[0].startswith(f"<i>(1/{len(parts)})</i>")


async def test_matching_rows_reach_every_allow_listed_chat_escaped_with_project_and_session(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_telegram: FakeTelegram
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram, telegram_concepts="gotcha")
    store = SqliteStore(tmp_path / "memq.db")
    rows = [
        fake_row(1, type="security_alert", title="<script>alert(1)</script> & co"),
        fake_row(2, type="discovery"),
        fake_row(3, type="discovery", concepts=["gotcha"], project="shop"),
        fake_row(4, kind="summary", type=None, request="wrap up"),
    ]
    await announce(redis, Keys("tg"), store, rows)
    async with _running(settings):
        await _sent(fake_telegram, 4)
        await asyncio.sleep(0.2)  # nothing else may arrive
    await store.aclose()
    assert {m.chat_id for m in fake_telegram.sent} == set(CHATS)
    for chat in CHATS:
        assert _row_ids(fake_telegram, chat) == [1, 3]
    first = fake_telegram.sent[0].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in first
    assert "<script>" not in first
    assert "project <code>demo</code> · session <code>s1</code>" in first
    assert fake_telegram.sent[0].parse_mode == "HTML"
    assert fake_telegram.refused == []


async def test_a_429_is_waited_out_for_its_retry_after_then_delivered_once(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_telegram: FakeTelegram
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram, telegram_chat_ids="111")
    store = SqliteStore(tmp_path / "memq.db")
    fake_telegram.fail_next(Failure(status=429, description="Too Many Requests", retry_after=1))
    await announce(redis, Keys("tg"), store, [fake_row(1, type="security_alert")])
    async with _running(settings):
        await _sent(fake_telegram, 1)
    await store.aclose()
    (refusal,) = fake_telegram.refused
    (message,) = fake_telegram.sent
    assert refusal.status == 429
    assert message.at - refusal.at >= 1.0
    counted = await redis.hgetall(Keys("tg").fanout_stats("telegram"))
    assert counted[b"rate_limited"] == b"1"
    assert counted[b"sent"] == b"1"


async def test_5xx_is_retried_and_a_message_that_never_goes_is_logged_counted_and_passed(
    tmp_path: Path,
    redis_url: str,
    redis: aioredis.Redis,
    fake_telegram: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram, telegram_chat_ids="111")
    store = SqliteStore(tmp_path / "memq.db")
    keys = Keys("tg")
    bad_gateway = Failure(status=502, description="Bad Gateway")
    with caplog.at_level(logging.WARNING):
        async with _running(settings, msgspec.structs.replace(FAST, max_attempts=3)):
            # Row 1: two 502s, then delivered by the third attempt.
            fake_telegram.fail_next(bad_gateway, bad_gateway)
            await announce(redis, keys, store, [fake_row(1, type="security_alert")])
            await _sent(fake_telegram, 1)
            # Row 2: three 500s, undeliverable; row 3 still goes.
            fake_telegram.fail_next(*[Failure(status=500)] * 3)
            rows = [fake_row(n, type="security_alert") for n in (2, 3)]
            await announce(redis, keys, store, rows)
            await _sent(fake_telegram, 2)
    await store.aclose()
    assert _row_ids(fake_telegram, "111") == [1, 3]
    assert len(fake_telegram.refused) == 5
    counted = await redis.hgetall(keys.fanout_stats("telegram"))
    assert counted[b"undeliverable"] == b"1"
    assert counted[b"retried"] == b"4"
    assert any(r.getMessage() == "Telegram message undeliverable" for r in caplog.records)


async def test_a_restart_mid_stream_loses_nothing_and_repeats_nothing(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_telegram: FakeTelegram
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram)
    store = SqliteStore(tmp_path / "memq.db")
    keys = Keys("tg")
    await announce(redis, keys, store, [fake_row(n, type="security_alert") for n in range(1, 31)])
    async with _running(settings):
        await _sent(fake_telegram, 15)
    stopped_at = len(fake_telegram.sent)
    assert stopped_at < 60  # the restart really is mid-stream
    # Announced while the bot is down: delivered after the restart.
    await announce(redis, keys, store, [fake_row(n, type="security_alert") for n in range(31, 41)])
    async with _running(settings):
        await _sent(fake_telegram, 80)
        await asyncio.sleep(0.2)
    await store.aclose()
    for chat in CHATS:
        assert _row_ids(fake_telegram, chat) == list(range(1, 41))


async def test_each_chat_gets_at_most_one_message_per_interval(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_telegram: FakeTelegram
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram)
    store = SqliteStore(tmp_path / "memq.db")
    await announce(
        redis, Keys("tg"), store, [fake_row(n, type="security_alert") for n in (1, 2, 3)]
    )
    async with _running(settings, msgspec.structs.replace(FAST, per_chat_s=0.3)):
        await _sent(fake_telegram, 6)
    await store.aclose()
    for chat in CHATS:
        times = [m.at for m in fake_telegram.sent if m.chat_id == chat]
        # Sends start 0.3 s apart; arrival may jitter by a few milliseconds on a busy machine.
        assert all(b - a >= 0.25 for a, b in itertools.pairwise(times))
    everything = [m.at for m in fake_telegram.sent]
    assert max(everything) - min(everything) < 1.2  # side by side; one after the other is 1.5 s


async def test_the_overall_rate_is_capped_per_second(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_telegram: FakeTelegram
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram)
    store = SqliteStore(tmp_path / "memq.db")
    rows = [fake_row(n, type="security_alert") for n in range(1, 7)]
    await announce(redis, Keys("tg"), store, rows)
    async with _running(settings, msgspec.structs.replace(FAST, global_per_s=5)):
        await _sent(fake_telegram, 12)
    await store.aclose()
    times = sorted(m.at for m in fake_telegram.sent)
    # A burst of 5, then 5 a second: the 12th goes 1.4 s after the first (0.1 s uncapped).
    assert times[-1] - times[0] >= 1.3


async def test_commands_are_answered_only_in_allow_listed_chats_and_only_once(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_telegram: FakeTelegram
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram)
    store = SqliteStore(tmp_path / "memq.db")
    await store_rows(
        store,
        observations=[
            observation(1, title="Login token leaks into logs", type="security_alert"),
            observation(2, title="Cache warmed at boot"),
        ],
    )
    await store.aclose()
    fake_telegram.push_update(999, "/recent")
    fake_telegram.push_update(111, "/recent")
    fake_telegram.push_update(999, "/stats")
    fake_telegram.push_update(111, "/search login token")
    fake_telegram.push_update(-100222, "/stats@memq_bot")
    async with _running(settings):
        replies = await _sent(fake_telegram, 3)
        await asyncio.sleep(0.3)
    async with _running(settings):  # a restart must not answer them again
        await asyncio.sleep(0.5)
    assert len(fake_telegram.sent) == 3
    assert [m.chat_id for m in fake_telegram.sent] == ["111", "111", "-100222"]
    recent, found, stats = replies
    assert "Login token leaks into logs" in recent
    assert "Cache warmed at boot" in recent
    assert "1 matches" in found
    assert "Login token leaks into logs" in found
    assert "Cache warmed" not in found
    assert "pending" in stats


async def _refused(fake: FakeTelegram, count: int, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while len(fake.refused) < count:
        if loop.time() > deadline:
            raise TimeoutError(f"fake Telegram refused {len(fake.refused)} of {count} messages")
        await asyncio.sleep(0.01)


async def test_a_429_to_one_chat_pauses_the_sends_to_every_chat(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_telegram: FakeTelegram
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram)
    store = SqliteStore(tmp_path / "memq.db")
    fake_telegram.fail_next(
        Failure(status=429, description="Too Many Requests", retry_after=1, chat_id="111")
    )
    await announce(redis, Keys("tg"), store, [fake_row(1, type="security_alert")])
    async with _running(settings):
        await _refused(fake_telegram, 1)
        # Asked only once chat 111 got its 429: the reply to -100222 must wait it out too.
        fake_telegram.push_update(-100222, "/stats")
        await _sent(fake_telegram, 3)
    await store.aclose()
    (refusal,) = fake_telegram.refused
    (reply,) = [m for m in fake_telegram.sent if "memq stats" in m.text]
    (retried,) = [m for m in fake_telegram.sent if m.chat_id == "111"]
    assert refusal.chat_id == "111"
    assert reply.chat_id == "-100222"
    assert reply.at - refusal.at >= 1.0
    assert retried.at - refusal.at >= 1.0


async def test_at_names_resolve_to_ids_at_startup_and_only_those_ids_are_answered(
    tmp_path: Path,
    redis_url: str,
    redis: aioredis.Redis,
    fake_telegram: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram, telegram_chat_ids="@devs,111")
    fake_telegram.add_chat(-100500, "devs")
    store = SqliteStore(tmp_path / "memq.db")
    await announce(redis, Keys("tg"), store, [fake_row(1, type="security_alert")])
    # Another chat that now carries the listed @username: ignored.
    fake_telegram.push_update(-100999, "/stats", username="devs")
    fake_telegram.push_update(-100500, "/stats")
    with caplog.at_level(logging.INFO):
        async with _running(settings):
            await _sent(fake_telegram, 3)
            await asyncio.sleep(0.3)  # nothing else may arrive
    await store.aclose()
    assert sorted(m.chat_id for m in fake_telegram.sent) == ["-100500", "-100500", "111"]
    assert [m.chat_id for m in fake_telegram.sent if "memq stats" in m.text] == ["-100500"]
    assert fake_telegram.calls.count("getChat") == 1
    counted = await redis.hgetall(Keys("tg").fanout_stats("telegram"))
    assert counted[b"ignored_chat"] == b"1"
    (resolved,) = [r for r in caplog.records if r.getMessage() == "Telegram chat resolved"]
    assert (resolved.__dict__["chat"], resolved.__dict__["chat_id"]) == ("@devs", -100500)


@pytest.mark.parametrize(
    ("chats", "message"),
    [
        ("111,@nobody", "MEMQ_TELEGRAM_CHAT_IDS holds @nobody, which the Bot API does not show"),
        ("@devs,-100500", "MEMQ_TELEGRAM_CHAT_IDS names chat -100500 twice (@devs and -100500)"),
    ],
)
async def test_chat_entries_that_resolve_to_no_chat_or_a_listed_one_are_refused(
    tmp_path: Path, redis_url: str, fake_telegram: FakeTelegram, chats: str, message: str
) -> None:
    settings = _settings(tmp_path, redis_url, fake_telegram, telegram_chat_ids=chats)
    fake_telegram.add_chat(-100500, "devs")
    with pytest.raises(ConfigError, match=re.escape(message)):
        await run_telegram(settings, stop=asyncio.Event(), tuning=FAST)
    assert fake_telegram.sent == []


def test_memq_telegram_never_prints_a_refused_token(
    tmp_path: Path, redis_url: str, fake_telegram: FakeTelegram
) -> None:
    token = "987654:refused-Token_value"
    env = subprocess_env(
        tmp_path,
        redis_url,
        PYTHONPATH=str(REPO),
        MEMQ_TELEGRAM_TOKEN=token,
        MEMQ_TELEGRAM_API_URL=fake_telegram.url,
        MEMQ_TELEGRAM_CHAT_IDS="111",
    )
    done = subprocess.run(
        [console_script(), "telegram"], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 2
    assert "MEMQ_TELEGRAM_TOKEN was refused by the Bot API" in done.stderr
    assert "***" in done.stderr
    assert token not in done.stdout + done.stderr
    assert token.split(":")[1] not in done.stdout + done.stderr


def test_log_lines_show_the_bot_api_url_with_the_token_masked() -> None:
    from io import StringIO

    from telegram.error import InvalidToken

    from worker.logs import formatter
    from worker.masked_text import TokenMask

    token = "123:abc-DEF"
    url = f"https://api.telegram.org/bot{token}/getMe"
    out = StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter("console", out))
    handler.addFilter(TokenMask(token))
    log = logging.getLogger("tests.telegram.mask")
    log.addHandler(handler)
    try:
        log.warning("HTTP Request: POST %s", url, extra={"url": url})
        log.warning("quoted: %s", url.replace(":", "%3A"))  # only the URL-quoted form
        try:
            raise InvalidToken(f"The token `{token}` was rejected by the server.")
        except InvalidToken:
            log.exception("getMe failed")
    finally:
        log.removeHandler(handler)
    text = out.getvalue()
    assert token not in text
    assert token.replace(":", "%3A") not in text
    assert "/bot***/getMe" in text
    assert "The token `***` was rejected" in text
    assert mask_token(f"/bot{token}/x", token) == "/bot***/x"
