"""Every row of DESIGN's outcome table, end to end: publish → real worker → SQLite → Redis."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from pipeline.events import encode_event
from pipeline.prompting.mode_files import load_mode
from tests.support.fake_observer import FakeObserver, Reply
from tests.support.worker_checks import (
    dead_letters,
    dropped_rows,
    observations,
    outcomes,
    stored_rows,
    subscribed,
    unacked,
    wait_until,
)
from tests.support.worker_harness import (
    drain,
    make_settings,
    prompt,
    publish,
    running_runtime,
    tool_call,
)
from worker.keys import Keys
from worker.settings import Settings

REPLIES = Path(__file__).resolve().parent.parent / "data" / "replies"
PROVIDERS = ["anthropic", "openai"]
QUOTA_PROSE = (REPLIES / "quota_prose.txt").read_text()
LOGIN_PROSE = (REPLIES / "login_prose.txt").read_text()
PLAIN_PROSE = (REPLIES / "plain_prose.txt").read_text()
LOGIN_MENTION = (REPLIES / "login_mention_prose.txt").read_text()


def _settings(tmp_path: Path, redis_url: str, fake: FakeObserver, provider: str = "anthropic",
              **extra: str) -> Settings:  # fmt: skip
    return make_settings(tmp_path, redis_url, fake.url, provider, **extra)


async def _run(settings: Settings, redis: ArqRedis) -> None:
    async with running_runtime(settings, redis) as rt:
        await drain(rt, redis)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_valid_reply_is_stored_with_new_and_deduplicated_counts(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver, provider: str
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer, provider)
    same = {"tool_input": {"command": "ls"}, "output": "a b"}
    calls = [tool_call("s1", 1, **same), tool_call("s1", 2), tool_call("s1", 3, **same)]
    await publish(arq_redis, settings, prompt("s1", 1, "list files"), *calls)
    await _run(settings, arq_redis)
    rows = await observations(settings, "s1")
    assert len(rows) == 2  # the two identical calls gave one observation
    counts = await outcomes(arq_redis, settings)
    assert (counts["stored"], counts["deduplicated"]) == (2, 1)
    assert await unacked(arq_redis, settings, "s1") == (0, 0)
    assert len(fake_observer.requests) == 1
    assert fake_observer.requests[0].provider == provider


async def test_skip_summary_reply_is_skipped_writes_nothing_and_acks(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer)
    fake_observer.script(Reply(text="<skip_summary/>"))
    await publish(arq_redis, settings, tool_call("s1", 1), tool_call("s1", 2))
    await _run(settings, arq_redis)
    assert await stored_rows(settings) == []
    assert await dropped_rows(settings) == []
    assert await unacked(arq_redis, settings, "s1") == (0, 0)
    counts = await outcomes(arq_redis, settings)
    assert (counts["skipped"], counts["stored"], counts["dropped"]) == (1, 0, 0)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_empty_reply_is_the_skip_the_prompt_asks_for(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver, provider: str
) -> None:
    # The mode tells the observer: "To skip, return an empty reply" — not a dropped reply.
    settings = _settings(tmp_path, redis_url, fake_observer, provider)
    fake_observer.script(Reply(text=""))
    await publish(arq_redis, settings, tool_call("s1", 1))
    await _run(settings, arq_redis)
    await publish(arq_redis, settings, tool_call("s1", 2))
    await _run(settings, arq_redis)
    assert await dropped_rows(settings) == []
    assert len(await observations(settings, "s1")) == 1
    counts = await outcomes(arq_redis, settings)
    assert (counts["skipped"], counts["dropped"], counts["stored"]) == (1, 0, 1)
    assert await unacked(arq_redis, settings, "s1") == (0, 0)


PAUSES = [
    pytest.param("anthropic", Reply(text=QUOTA_PROSE), id="quota-prose"),
    pytest.param("openai", Reply(text=LOGIN_PROSE), id="auth-prose"),
    pytest.param(
        "anthropic",
        Reply(status=402, error_type="billing_error", error_message="Your credit balance is low"),
        id="http-402",
    ),
    pytest.param(
        "openai",
        Reply(
            status=429,
            error_type="insufficient_quota",
            error_message="You exceeded your current quota",
        ),
        id="http-insufficient-quota",
    ),
    pytest.param(
        "anthropic",
        Reply(status=401, error_type="authentication_error", error_message="invalid x-api-key"),
        id="http-401",
    ),
]


@pytest.mark.parametrize(("provider", "first"), PAUSES)
async def test_quota_or_auth_pauses_the_provider_keeps_the_batch_then_stores_it(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    provider: str,
    first: Reply,
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer, provider, quota_pause_s="1")
    keys = Keys(settings.prefix)
    fake_observer.script(first)
    await publish(arq_redis, settings, tool_call("s1", 1), tool_call("s1", 2))
    async with running_runtime(settings, arq_redis) as rt:
        worker = asyncio.create_task(drain(rt, arq_redis))
        try:
            await wait_until(lambda: arq_redis.exists(keys.pause(provider)), what="a pause")
            assert 0 < await arq_redis.pttl(keys.pause(provider)) <= 1000
            # Paused: nothing acked, nothing stored, the entries wait in the pending list.
            assert await unacked(arq_redis, settings, "s1") == (2, 2)
            assert await stored_rows(settings) == []
        finally:
            await worker
    rows = await observations(settings, "s1")
    assert len(rows) == 2
    requests = fake_observer.requests
    assert len(requests) == 2
    assert requests[1].received_at - requests[0].received_at >= 0.9  # waited out the pause
    assert await unacked(arq_redis, settings, "s1") == (0, 0)
    counts = await outcomes(arq_redis, settings)
    assert (counts["paused"], counts["stored"], counts["dropped"]) == (1, 2, 0)


async def test_a_paused_provider_defers_every_session_until_the_pause_ends(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer)
    # Another worker's session hit the quota: this session must not call the provider.
    await arq_redis.set(Keys(settings.prefix).pause("anthropic"), "quota", px=800)
    await publish(arq_redis, settings, tool_call("s2", 1))
    started = time.time()
    await _run(settings, arq_redis)
    (request,) = fake_observer.requests
    assert request.received_at - started >= 0.75
    assert len(await observations(settings, "s2")) == 1
    # Deferring is not a new pause: nothing counted as paused, nothing as retried.
    counts = await outcomes(arq_redis, settings)
    assert (counts["paused"], counts["retry"], counts["stored"]) == (0, 0, 1)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("prose", [PLAIN_PROSE, LOGIN_MENTION], ids=["plain", "mentions-login"])
async def test_prose_is_dropped_kept_and_acked_once_never_requeued(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    provider: str,
    prose: str,
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer, provider)
    fake_observer.script(Reply(text=prose))
    calls = [tool_call("s1", 1), tool_call("s1", 2)]
    await publish(arq_redis, settings, *calls)
    await _run(settings, arq_redis)
    await _run(settings, arq_redis)  # a second worker pass finds nothing to redo
    assert len(fake_observer.requests) == 1
    assert await stored_rows(settings) == []
    (dropped,) = await dropped_rows(settings)
    assert dropped.category == "prose"
    assert dropped.raw == prose
    assert dropped.event_ids == [c.event_id for c in calls]
    assert dropped.memory_session_id == "s1"
    assert await unacked(arq_redis, settings, "s1") == (0, 0)
    counts = await outcomes(arq_redis, settings)
    assert (counts["dropped"], counts["dropped:prose"], counts["retry"]) == (1, 1, 0)
    assert counts["paused"] == 0
    assert await arq_redis.exists(Keys(settings.prefix).pause(provider)) == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rate_limit_with_retry_after_waits_then_succeeds(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver, provider: str
) -> None:
    # The harness caps backoff at 0.2 s: a longer retry-after must still be honoured.
    settings = _settings(tmp_path, redis_url, fake_observer, provider)
    fake_observer.script(
        Reply(status=429, headers={"retry-after": "1"}, error_type="rate_limit_error")
    )
    await publish(arq_redis, settings, tool_call("s1", 1))
    await _run(settings, arq_redis)
    first, second = fake_observer.requests
    assert second.received_at - first.received_at >= 0.95
    assert len(await observations(settings, "s1")) == 1
    counts = await outcomes(arq_redis, settings)
    assert (counts["retry"], counts["stored"], counts["dead"]) == (1, 1, 0)


async def test_server_errors_until_max_attempts_dead_letter_and_reset_the_observer(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer, max_attempts="3")
    keys = Keys(settings.prefix)
    await publish(arq_redis, settings, prompt("s1", 1, "build it"), tool_call("s1", 1))
    await _run(settings, arq_redis)
    assert await arq_redis.exists(keys.observer("s1"))
    fake_observer.script(*[Reply(status=500, error_message="upstream exploded")] * 3)
    doomed = [tool_call("s1", 2), tool_call("s1", 3)]
    await publish(arq_redis, settings, *doomed)
    await _run(settings, arq_redis)
    assert len(fake_observer.requests) == 4
    letters = await dead_letters(arq_redis, settings)
    assert [d["session"] for d in letters] == ["s1", "s1"]
    assert all("retries exhausted" in d["reason"] and "500" in d["reason"] for d in letters)
    assert [d["event"] for d in letters] == [encode_event(e).decode() for e in doomed]
    assert await unacked(arq_redis, settings, "s1") == (0, 0)
    assert not await arq_redis.exists(keys.observer("s1"))
    counts = await outcomes(arq_redis, settings)
    assert (counts["retry"], counts["dead"], counts["stored"]) == (2, 2, 1)
    # The next batch starts a fresh conversation: a continuation prompt, no history.
    await publish(arq_redis, settings, tool_call("s1", 4))
    await _run(settings, arq_redis)
    last = fake_observer.requests[-1]
    assert len(last.messages) == (1 if last.provider == "anthropic" else 2)
    assert load_mode("code").prompts.continuation_greeting in last.system
    assert len(await observations(settings, "s1")) == 2


async def test_malformed_entries_are_dead_lettered_and_block_nothing(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer)
    stream = Keys(settings.prefix).events("s1")
    await publish(arq_redis, settings, tool_call("s1", 1))
    await arq_redis.xadd(stream, {"event": b"{not json"})
    await arq_redis.xadd(stream, {"payload": b"no event field"})
    await arq_redis.xadd(stream, {"event": b'{"kind": "telepathy", "event_id": "x"}'})
    await publish(arq_redis, settings, tool_call("s1", 2), tool_call("s1", 3))
    await _run(settings, arq_redis)
    letters = await dead_letters(arq_redis, settings)
    assert len(letters) == 3
    assert all(d["reason"] and "\n" not in d["reason"] for d in letters)
    assert "no 'event' field" in letters[1]["reason"]
    assert letters[0]["event"] == "{not json"
    assert len(await observations(settings, "s1")) == 3
    assert await unacked(arq_redis, settings, "s1") == (0, 0)
    assert (await outcomes(arq_redis, settings))["dead"] == 3


async def test_fenced_xml_reply_is_stored(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer, "openai")
    fake_observer.script(Reply(text=(REPLIES / "fenced.md").read_text()))
    await publish(arq_redis, settings, tool_call("s1", 1))
    await _run(settings, arq_redis)
    (row,) = await observations(settings, "s1")
    assert (row.type, row.title) == ("change", "Default prefix renamed to memq")


async def test_same_observation_twice_is_one_row_and_one_broadcast(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = _settings(tmp_path, redis_url, fake_observer)
    same = {"tool_input": {"command": "git status"}, "output": "clean"}
    async with subscribed(redis_url, settings) as announced:
        await publish(arq_redis, settings, tool_call("s1", 1, **same))
        await _run(settings, arq_redis)
        await publish(arq_redis, settings, tool_call("s1", 1, **same))
        await _run(settings, arq_redis)
    assert len(fake_observer.requests) == 2
    (row,) = await observations(settings, "s1")
    assert [m["id"] for m in announced.messages] == [row.id]
    assert announced.messages[0]["kind"] == "observation"
    feed = await arq_redis.xrange(Keys(settings.prefix).feed)
    assert len(feed) == 1
    counts = await outcomes(arq_redis, settings)
    assert (counts["stored"], counts["deduplicated"]) == (1, 1)
