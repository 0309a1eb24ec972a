"""The observer conversation end to end: prompts, summaries, batching, history, files, end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest
from arq.connections import ArqRedis

from pipeline.prompting.mode_files import load_mode
from pipeline.prompting.prompts import RECORDED_ELEMENT
from tests.support.fake_observer import FakeObserver, Reply
from tests.support.worker_checks import (
    dropped_rows,
    message_texts,
    observations,
    outcomes,
    stored_rows,
    unacked,
)
from tests.support.worker_harness import (
    drain,
    end,
    make_settings,
    prompt,
    publish,
    running_runtime,
    sqlite_store,
    summarize,
    tool_call,
)
from worker.keys import Keys
from worker.settings import Settings

MODE = load_mode("code").prompts
SESSION_ELEMENT = "<observed_from_primary_session>"
ONE_OBSERVATION = """<observation>
  <type>discovery</type>
  <title>Config loader reads MEMQ_* once</title>
  <narrative>Settings are read once and passed down.</narrative>
</observation>"""
A_SUMMARY = """<summary>
  <request>fix the login test</request>
  <investigated>the session middleware</investigated>
  <learned>cookies were not refreshed</learned>
  <completed>the login test passes</completed>
  <next_steps>none</next_steps>
</summary>"""


async def _run(settings: Settings, redis: ArqRedis) -> None:
    async with running_runtime(settings, redis) as rt:
        await drain(rt, redis)


def _calls_in(user: str) -> int:
    return user.count(SESSION_ELEMENT)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_lost_observer_state_continues_with_the_continuation_prompt(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver, provider: str
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, provider)
    await publish(arq_redis, settings, prompt("s1", 1, "fix the flaky login test"),
                  tool_call("s1", 1))  # fmt: skip
    await _run(settings, arq_redis)
    await arq_redis.delete(Keys(settings.prefix).observer("s1"))
    await publish(arq_redis, settings, tool_call("s1", 2))
    await _run(settings, arq_redis)
    await publish(arq_redis, settings, tool_call("s1", 3))
    await _run(settings, arq_redis)
    first, second, third = fake_observer.requests
    assert "fix the flaky login test" in first.system
    assert "<memory_session_id>s1</memory_session_id>" in first.system
    assert MODE.continuation_greeting not in first.system
    assert MODE.continuation_greeting in second.system
    assert "<memory_session_id>s1</memory_session_id>" in second.system
    assert message_texts(second.messages, "assistant") == []
    assert f"<{RECORDED_ELEMENT}>" not in second.user  # what the lost state recorded is gone
    # The session goes on from the new conversation, with what it recorded since.
    assert third.system == second.system
    assert "- discovery: " in third.user
    assert len(await observations(settings, "s1")) == 3


@pytest.mark.parametrize("numbered", [True, False], ids=["numbered", "unnumbered"])
async def test_lost_observer_state_continues_with_the_stored_request(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    numbered: bool,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    for n, text in ((1, "fix the login test"), (2, "now add a logout button")):
        request = prompt("s1", n, text)
        if not numbered:  # as the Claude Code hook publishes them
            request = msgspec.structs.replace(request, prompt_number=None)
        await publish(arq_redis, settings, request, tool_call("s1", n))
        await _run(settings, arq_redis)
    await arq_redis.delete(Keys(settings.prefix).observer("s1"))
    await publish(arq_redis, settings, tool_call("s1", 3))  # no prompt event in this turn
    await _run(settings, arq_redis)
    await publish(arq_redis, settings, tool_call("s1", 4))
    await _run(settings, arq_redis)
    *_, lost, after = fake_observer.requests
    assert len(fake_observer.requests) == 4
    assert MODE.continuation_greeting in lost.system
    # The stored request, numbered by its position when published without a number.
    assert '<user_request prompt_number="2">now add a logout button</user_request>' in lost.system
    assert "fix the login test" not in lost.system
    assert message_texts(lost.messages, "assistant") == []  # the old history is gone
    # The observer is not told of that request again as a new one.
    assert MODE.new_request_notice not in lost.user
    assert MODE.new_request_notice not in after.user
    assert after.system == lost.system
    rows = await observations(settings, "s1")
    assert [r.prompt_number for r in rows[2:]] == [2, 2]


@pytest.mark.parametrize("prompt_alone", [False, True], ids=["with-its-calls", "alone-first"])
async def test_a_later_prompt_is_told_to_the_observer_once(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    prompt_alone: bool,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    await publish(arq_redis, settings, prompt("s1", 1, "fix the login test"), tool_call("s1", 1))
    await _run(settings, arq_redis)
    later = prompt("s1", 2, "now add a logout button")
    if prompt_alone:  # the user's prompt reaches the worker before the agent's tool calls
        await publish(arq_redis, settings, later)
        await _run(settings, arq_redis)
        await publish(arq_redis, settings, tool_call("s1", 2))
    else:
        await publish(arq_redis, settings, later, tool_call("s1", 2))
    await _run(settings, arq_redis)
    await publish(arq_redis, settings, tool_call("s1", 3))
    await _run(settings, arq_redis)
    first, second, third = fake_observer.requests
    assert MODE.new_request_notice not in first.user
    assert MODE.new_request_notice in second.user
    assert "now add a logout button" in second.user
    assert 'prompt_number="2"' in second.user
    assert MODE.new_request_notice not in third.user
    assert third.system == first.system  # the cached system prompt never changes
    rows = await observations(settings, "s1")
    assert [r.prompt_number for r in rows] == [1, 2, 2]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_summary_is_stored_after_the_observations(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver, provider: str
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, provider)
    await publish(arq_redis, settings, prompt("s1", 1, "fix the login test"),
                  tool_call("s1", 1), summarize("s1", "The test passes now."))  # fmt: skip
    await _run(settings, arq_redis)
    rows = await stored_rows(settings, "s1")
    assert [r.kind for r in rows] == ["observation", "summary"]
    summary = rows[1]
    assert summary.request == "fix the login test"
    assert summary.learned == "The test passes now."
    assert len(fake_observer.requests) == 2


async def test_summary_answered_with_observations_gets_one_reminder(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    fake_observer.script(Reply(text=ONE_OBSERVATION), Reply(text=A_SUMMARY))
    await publish(arq_redis, settings, prompt("s1", 1, "fix the login test"), summarize("s1"))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
        reminder = rt.mode.prompts.summary_reminder
    first, second = fake_observer.requests
    assert reminder not in first.user
    assert second.user == reminder
    # The reminder follows the exchange it corrects.
    assert message_texts(second.messages, "assistant") == [ONE_OBSERVATION]
    rows = await stored_rows(settings, "s1")
    assert [(r.kind, r.completed) for r in rows] == [("summary", "the login test passes")]
    assert await dropped_rows(settings) == []


async def test_summary_still_answered_with_observations_is_dropped(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, "openai")
    fake_observer.script(Reply(text=ONE_OBSERVATION), Reply(text=ONE_OBSERVATION))
    event = summarize("s1")
    await publish(arq_redis, settings, event)
    await _run(settings, arq_redis)
    assert len(fake_observer.requests) == 2
    assert await stored_rows(settings) == []
    (dropped,) = await dropped_rows(settings)
    assert (dropped.category, dropped.turn_kind) == ("summary_as_observation", "summary")
    assert dropped.event_ids == [event.event_id]
    assert await unacked(arq_redis, settings, "s1") == (0, 0)
    assert (await outcomes(arq_redis, settings))["dropped:summary_as_observation"] == 1


@pytest.mark.parametrize(("calls", "per_request"), [(8, [8]), (11, [8, 3])])
async def test_tool_calls_published_together_share_a_turn_up_to_the_batch_size(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    calls: int,
    per_request: list[int],
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, batch_max_events="8")
    await publish(arq_redis, settings, *[tool_call("s1", n) for n in range(calls)])
    await _run(settings, arq_redis)
    assert [_calls_in(r.user) for r in fake_observer.requests] == per_request
    assert len(await observations(settings, "s1")) == calls


async def test_calls_published_50ms_apart_share_a_turn_within_the_debounce(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, batch_wait_ms="300")
    await publish(arq_redis, settings, tool_call("s1", 0))
    async with running_runtime(settings, arq_redis) as rt:
        worker = asyncio.create_task(drain(rt, arq_redis))
        try:
            for n in range(1, 4):
                await asyncio.sleep(0.05)
                await publish(arq_redis, settings, tool_call("s1", n))
        finally:
            await worker
    (request,) = fake_observer.requests
    assert _calls_in(request.user) == 4
    assert len(await observations(settings, "s1")) == 4


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_history_is_bounded_to_the_last_turns(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver, provider: str
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, provider,
                             history_turns="2", batch_max_events="1")  # fmt: skip
    await publish(arq_redis, settings, *[tool_call("s1", n) for n in range(5)])
    await _run(settings, arq_redis)
    requests = fake_observer.requests
    assert len(requests) == 5
    earlier = [len(message_texts(r.messages, "assistant")) for r in requests]
    assert earlier == [0, 1, 2, 2, 2]
    # The two kept exchanges are the newest ones: calls 2 and 3 before call 4.
    users = message_texts(requests[4].messages, "user")
    assert len(users) == 3
    assert all(f"echo step {n}" in text for n, text in zip((2, 3, 4), users, strict=True))


async def test_files_come_from_tool_evidence_and_invented_paths_are_dropped(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    edit = tool_call("s1", 1, tool="Edit", tool_input={
        "file_path": "/work/demo/app.py", "old_string": "a", "new_string": "b"})  # fmt: skip
    read = tool_call("s1", 2, tool="Read", tool_input={"file_path": "/work/demo/README.md"})
    grep = tool_call("s1", 3, tool="Grep", tool_input={"pattern": "x", "path": "src/util.py"})
    fake_observer.script(
        Reply(
            text="""<observation>
  <type>change</type>
  <title>App edited after reading the README</title>
  <narrative>The agent changed app.py.</narrative>
  <files_read><file>/etc/passwd</file><file>src/util.py</file></files_read>
  <files_modified><file>/tmp/invented.py</file></files_modified>
</observation>"""
        )
    )
    await publish(arq_redis, settings, edit, read, grep)
    await _run(settings, arq_redis)
    (row,) = await observations(settings, "s1")
    assert row.files_modified == ["/work/demo/app.py"]
    assert row.files_read == ["/work/demo/README.md", "src/util.py"]


async def test_end_deletes_the_drained_stream_and_forgets_the_session(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    keys = Keys(settings.prefix)
    await publish(arq_redis, settings, prompt("s1", 1, "tidy up"), tool_call("s1", 1),
                  tool_call("s2", 1), end("s1"))  # fmt: skip
    assert await arq_redis.smembers(keys.sessions) == {b"s1", b"s2"}
    await _run(settings, arq_redis)
    assert not await arq_redis.exists(keys.events("s1"))
    assert await arq_redis.smembers(keys.sessions) == {b"s2"}
    assert await unacked(arq_redis, settings, "s2") == (0, 0)
    assert await arq_redis.exists(keys.events("s2"))  # not ended: kept for what comes next
    store = sqlite_store(settings)
    try:
        sessions = {s.memory_session_id: s for s in await store.sessions()}
    finally:
        await store.aclose()
    assert sessions["s1"].ended_at is not None
    assert sessions["s2"].ended_at is None
    # The same session id may come back: it starts a fresh stream and is observed again.
    await publish(arq_redis, settings, tool_call("s1", 2))
    await _run(settings, arq_redis)
    assert len(await observations(settings, "s1")) == 2
