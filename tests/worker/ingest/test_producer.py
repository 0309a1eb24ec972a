"""Producer: publish → stream entry → decode, idempotency, backpressure, scrubbing, size cap."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from pipeline.errors import EventDecodeError
from pipeline.events import End, Event, Prompt, Summarize, ToolCall, decode_event, encode_event
from tests.support.ingest import stored_bytes
from worker.errors import BackpressureError, RedisUnavailableError
from worker.ingest.prepare import PreparedEvent
from worker.ingest.producer import (
    DEDUPE_WINDOW_S,
    Producer,
    PublishRefusedError,
    PublishResult,
    SyncProducer,
    prepare_event,
)
from worker.keys import Keys
from worker.queue.arq_job_format import ARQ_JOB_KEY_PREFIX
from worker.queue.scheduling import job_deserializer
from worker.settings import Settings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ANTHROPIC_KEY = "sk-ant-api03-Zq8vN3xLr5Tb7Yw2Kd9Hf4Jm6Pc1Gs0Ae8Ui3Oy5Rt7We2Qa4Sd6Fg"
GITHUB_TOKEN = "ghp_R7tY2uI9oP4aS6dF1gH3jK8lZ5xC0vB2nM7q"
PASSWORD = "Tr0ub4dor&3xyzzy"
PRIVATE = "my bank PIN is 4471"

Publish = Callable[[list[Event]], Awaitable[list[PublishResult]]]


def _common(event_id: str, session: str = "s1") -> dict[str, Any]:
    return {
        "event_id": event_id,
        "memory_session_id": session,
        "project": "shop",
        "occurred_at": NOW,
        "host": "laptop",
        "agent": "custom",
    }


EVENTS: list[Event] = [
    Prompt(prompt_text="Fix the cart discount", prompt_number=1, **_common("p1")),
    ToolCall(
        tool_name="Bash",
        tool_input={"command": "pytest -q"},
        tool_output="1 failed, 4 passed",
        cwd="/home/dev/shop",
        tool_use_id="toolu_1",
        **_common("t1"),
    ),
    Summarize(last_assistant_message="Rounded after tax now.", **_common("s1")),
    End(reason="prompt_input_exit", **_common("e1")),
]


@pytest.fixture(name="settings")
def _fix_settings(redis_url: str, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, data_dir=str(tmp_path), prefix="t")


@pytest.fixture(name="publish", params=["async", "sync"])
async def _fix_publish(
    request: pytest.FixtureRequest, redis: aioredis.Redis, settings: Settings
) -> AsyncIterator[Callable[..., Awaitable[list[PublishResult]]]]:
    """publish_many through the async Producer or the SyncProducer, same contract."""
    sync = SyncProducer.connect(settings) if request.param == "sync" else None

    async def publish(events: list[Event], s: Settings = settings) -> list[PublishResult]:
        # Every caller prepares once (the producers take only prepared events).
        prepared = [prepare_event(e, s) for e in events]
        if sync is None:
            return await Producer(redis, s).publish_many(prepared)
        sync.settings = s
        return sync.publish_many(prepared)

    yield publish
    if sync is not None:
        sync.close()


async def _entries(
    redis: aioredis.Redis, session: str = "s1"
) -> list[tuple[bytes, dict[bytes, bytes]]]:
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await redis.xrange(Keys("t").events(session))
    return entries


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
async def test_every_kind_round_trips_through_its_stream_entry(
    redis: aioredis.Redis, publish: Publish, event: Event
) -> None:
    (result,) = await publish([event])
    ((entry_id, fields),) = await _entries(redis)
    assert result == PublishResult(
        event_id=event.event_id, memory_session_id="s1", status="added", stream_id=entry_id.decode()
    )
    assert list(fields) == [b"event"]
    assert decode_event(fields[b"event"]) == event


async def test_async_publish_returns_the_stream_id(
    redis: aioredis.Redis, settings: Settings
) -> None:
    result = await Producer(redis, settings).publish(prepare_event(EVENTS[0], settings))
    ((entry_id, _),) = await _entries(redis)
    assert (result.status, result.stream_id) == ("added", entry_id.decode())


async def test_same_event_id_twice_stores_one_entry(
    redis: aioredis.Redis, publish: Publish
) -> None:
    first = await publish([EVENTS[1]])
    again = await publish([EVENTS[1], EVENTS[1]])
    assert [r.status for r in first + again] == ["added", "duplicate", "duplicate"]
    assert {r.stream_id for r in first + again} == {first[0].stream_id}
    assert len(await _entries(redis)) == 1


async def test_publish_schedules_one_observe_job_for_the_session(
    redis: aioredis.Redis, publish: Publish, settings: Settings
) -> None:
    await publish(EVENTS)
    keys = Keys("t")
    job_id = (await redis.get(keys.scheduled("s1"))).decode()
    assert await redis.zrange(keys.queue, 0, -1) == [job_id.encode()]
    job = job_deserializer(await redis.get(ARQ_JOB_KEY_PREFIX + job_id))
    assert (job["f"], job["a"]) == ("observe_session", ["s1"])
    assert await redis.smembers(keys.sessions) == {b"s1"}
    ttl = await redis.ttl(keys.seen("p1"))
    assert DEDUPE_WINDOW_S - 5 <= ttl <= DEDUPE_WINDOW_S


async def test_order_within_a_batch_is_kept(redis: aioredis.Redis, publish: Publish) -> None:
    events = [replace_id(EVENTS[1], f"t{i}") for i in range(1200)]  # more than one chunk
    await publish(events)
    stored = [decode_event(f[b"event"]).event_id for _, f in await _entries(redis)]
    assert stored == [e.event_id for e in events]


def replace_id(event: Event, event_id: str) -> Event:
    return msgspec.structs.replace(event, event_id=event_id)


async def test_backpressure_refuses_over_the_limit_naming_session_and_limit(
    redis: aioredis.Redis, publish: Publish, settings: Settings
) -> None:
    tight = msgspec.structs.replace(settings, max_pending_per_session=2)
    events = [replace_id(EVENTS[0], f"p{i}") for i in range(3)]
    with pytest.raises(PublishRefusedError) as caught:
        await publish(events, tight)
    assert [r.status for r in caught.value.results] == ["added", "added", "refused"]
    assert "session s1" in str(caught.value)
    assert "MEMQ_MAX_PENDING_PER_SESSION=2" in str(caught.value)
    assert len(await _entries(redis)) == 2


async def test_single_publish_raises_backpressure_error(
    redis: aioredis.Redis, settings: Settings
) -> None:
    producer = Producer(redis, msgspec.structs.replace(settings, max_pending_per_session=1))
    await producer.publish(prepare_event(EVENTS[0], settings))
    with pytest.raises(BackpressureError, match=r"session s1 .* 1 unprocessed"):
        await producer.publish(prepare_event(replace_id(EVENTS[0], "p-next"), settings))


def _leaky_events() -> list[Event]:
    secret_text = (
        f"export ANTHROPIC_API_KEY={ANTHROPIC_KEY}\npassword = {PASSWORD}\n"
        f"<private>{PRIVATE}</private> done"
    )
    return [
        Prompt(
            prompt_text=f"deploy with token {GITHUB_TOKEN} <private>{PRIVATE}</private>",
            **_common("p1"),
        ),
        ToolCall(
            tool_name="Bash",
            tool_input={"command": secret_text, "env": {"GITHUB_TOKEN": GITHUB_TOKEN}},
            tool_output=[secret_text, {"nested": f"<private>{PRIVATE}</private>"}],
            **_common("t1"),
        ),
        Summarize(last_assistant_message=secret_text, **_common("s1")),
        End(reason=secret_text, **_common("e1")),
    ]


async def test_secrets_and_private_content_never_reach_redis(
    redis: aioredis.Redis, publish: Publish
) -> None:
    await publish(_leaky_events())
    stored = await stored_bytes(redis)
    assert len(await _entries(redis)) == 4
    for needle in (ANTHROPIC_KEY, GITHUB_TOKEN, PASSWORD, PRIVATE, "<private>"):
        assert needle.encode() not in stored, needle
    assert b"[REDACTED:" in stored


def test_prepare_strips_private_regions_before_redacting() -> None:
    settings = Settings()
    event = _leaky_events()[0]
    prepared = prepare_event(event, settings).event
    assert isinstance(prepared, Prompt)
    assert PRIVATE not in prepared.prompt_text
    assert GITHUB_TOKEN not in prepared.prompt_text
    assert prepared.prompt_text.startswith("deploy with token [REDACTED:")


def _marker_counts(text: str) -> tuple[int, int]:
    m = re.search(r'<elided chars="(\d+)" original_size_chars="(\d+)" reason="oversize" />', text)
    assert m is not None, "no elided marker"
    return int(m.group(1)), int(m.group(2))


async def test_a_100_mb_tool_output_is_truncated_not_rejected(
    redis: aioredis.Redis, settings: Settings
) -> None:
    size = 100 * 1024 * 1024
    line = f"log line with a key {ANTHROPIC_KEY} and more text\n"
    output = line * (size // len(line))
    event = ToolCall(tool_name="Bash", tool_output=output, tool_input="make", **_common("big"))
    result = await Producer(redis, settings).publish(prepare_event(event, settings))
    del output, event
    ((_, fields),) = await _entries(redis)
    raw = fields[b"event"]
    assert result.status == "added"
    assert len(raw) <= settings.max_event_bytes
    # Most of the budget is used (redaction shortens this secret-dense text's window).
    assert len(raw) > settings.max_event_bytes * 0.5
    stored = decode_event(raw)
    assert isinstance(stored, ToolCall)
    assert stored.tool_input == "make"
    elided, original = _marker_counts(stored.tool_output)
    assert original == size // len(line) * len(line)
    assert stored.tool_output.startswith("log line with a key [REDACTED:anthropic-api-key]")
    assert original - 2 * settings.max_event_bytes < elided < original
    assert ANTHROPIC_KEY.encode() not in raw


@pytest.mark.parametrize(
    ("text", "max_bytes"),
    [
        ("é" * 300_000, 16_384),  # two bytes per character in UTF-8
        ("\x01" * 100_000, 16_384),  # six bytes per character once JSON-escaped
        ("🙂 " * 200_000, 65_536),
    ],
    ids=["latin", "control", "emoji"],
)
def test_oversized_fields_fit_the_cap_whatever_their_encoding(text: str, max_bytes: int) -> None:
    event = Summarize(last_assistant_message=text, **_common("s9"))
    prepared = prepare_event(event, Settings(max_event_bytes=max_bytes)).event
    raw = encode_event(prepared)
    assert max_bytes * 0.5 < len(raw) <= max_bytes
    assert isinstance(prepared, Summarize)
    assert prepared.last_assistant_message is not None
    assert _marker_counts(prepared.last_assistant_message)[1] == len(text)


def test_two_big_fields_share_the_budget() -> None:
    event = ToolCall(tool_name="Edit", tool_input="a" * 50_000, tool_output="b" * 50_000,
                     **_common("t2"))  # fmt: skip
    prepared = prepare_event(event, Settings(max_event_bytes=20_000)).event
    assert isinstance(prepared, ToolCall)
    sizes = [len(prepared.tool_input), len(prepared.tool_output)]
    assert len(encode_event(prepared)) <= 20_000
    assert abs(sizes[0] - sizes[1]) < 100
    assert min(sizes) > 8_000


def test_a_small_field_stays_whole_beside_a_big_one() -> None:
    event = ToolCall(tool_name="Read", tool_input={"file_path": "/a.py"}, tool_output="z" * 90_000,
                     **_common("t3"))  # fmt: skip
    prepared = prepare_event(event, Settings(max_event_bytes=16_384)).event
    assert isinstance(prepared, ToolCall)
    assert prepared.tool_input == {"file_path": "/a.py"}
    assert "<elided" in prepared.tool_output


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (ToolCall(tool_name="Bash", cwd="/x" * 20_000, **_common("t4")), "MEMQ_MAX_EVENT_BYTES"),
        (Prompt(prompt_text="hi", **_common("p4", session="has space")), "memory_session_id"),
        (Prompt(prompt_text="hi", **_common("")), "event_id"),
    ],
    ids=["huge-cwd", "bad-session-id", "empty-event-id"],
)
def test_malformed_events_are_rejected_with_a_reason(event: Event, reason: str) -> None:
    with pytest.raises(EventDecodeError, match=reason):
        prepare_event(event, Settings(max_event_bytes=16_384))


def test_sync_producer_sends_the_same_keys_and_args_as_the_scheduler(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import worker.ingest.producer as producer_module
    import worker.queue.scheduling as scheduling_module

    monkeypatch.setattr(scheduling_module, "now_ms", lambda: 1_700_000_000_000)
    raw = encode_event(EVENTS[1])
    keys, args = scheduling_module.publish_args(
        Keys("t"),
        "s1",
        "t1",
        raw,
        dedupe_ttl_s=DEDUPE_WINDOW_S,
        max_pending=settings.max_pending_per_session,
        due_now=not isinstance(EVENTS[1], ToolCall),
        full_at=settings.batch_max_events,
    )
    with SyncProducer.connect(settings) as sync:
        command = sync._command(PreparedEvent(EVENTS[1], raw))
    assert command[:3] == ["EVALSHA", producer_module._PUBLISH_SHA, len(keys)]
    assert command[3:] == [*keys, *args]


async def test_sync_producer_honours_credentials_and_database_in_the_url(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    await redis.execute_command("ACL", "SETUSER", "memq-test", "on", ">s3cret", "~*", "+@all")
    try:
        url = redis_url.replace("redis://", "redis://memq-test:s3cret@").replace("/0", "/3")
        settings = Settings(redis_url=url, data_dir=str(tmp_path), prefix="t")
        with SyncProducer.connect(settings) as sync:
            sync.publish(prepare_event(EVENTS[0], settings))
        db3 = aioredis.Redis.from_url(redis_url.replace("/0", "/3"))
        assert await db3.xlen(Keys("t").events("s1")) == 1
        await db3.flushdb()
        await db3.aclose()
        wrong = msgspec.structs.replace(settings, redis_url=url.replace("s3cret", "nope"))
        with pytest.raises(RedisUnavailableError, match=r"memq-test:\*\*\*@.* refused") as e:
            SyncProducer.connect(wrong)
        assert "nope" not in str(e.value)
    finally:
        await redis.execute_command("ACL", "DELUSER", "memq-test")


async def test_unseen_names_the_events_redis_has_not_had_within_the_window(
    settings: Settings,
) -> None:
    with SyncProducer.connect(settings) as sync:
        sync.publish(prepare_event(EVENTS[1], settings))
        fresh = replace_id(EVENTS[1], "t-new")
        # One round trip: the call its hook already published is left out, the new one kept.
        assert sync.unseen([EVENTS[1], fresh]) == [fresh]
        assert sync.unseen([]) == []
