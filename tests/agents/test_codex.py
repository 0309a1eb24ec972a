"""The real Codex CLI (0.169.0) wired to memq as docs/agents/codex.md says, with a scripted model.

`codex exec` runs offline against the fake Responses API: the model reads a file, runs
commands (one fails), edits and adds files with apply_patch, searches, calls memq's MCP
tool and reads a `.env` with secrets in it. memq's hooks publish every call to a real Redis
and a `memq worker` process stores what the fake observer makes of them. A second session
then gets the first one's memory at its start.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis as sync_redis
import redis.asyncio as aioredis

from pipeline.events import Event, Prompt, Summarize, ToolCall, decode_event
from tests.support.agent_models.responses import (
    CustomCall,
    FakeResponses,
    FunctionCall,
    Message,
    ToolSearch,
    fake_responses_fixture,  # noqa: F401
)
from tests.support.agent_stack import AgentStack
from tests.support.codex_agent import codex_exec, write_codex_config
from tests.support.fake_observer import FakeObserver
from tests.support.ingest import stored_bytes
from tests.support.worker_checks import outcomes
from tests.support.worker_harness import sqlite_store
from worker.keys import Keys
from worker.storage.records import StoredRow

# Two real Codex sessions, a redis-server and a memq worker.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ANTHROPIC_KEY = (
    "sk-ant-api03-RHtUVQcDMpg0TMkxpdzPaEMM1ZA7V0FhHVJWDBt2hWdQZUm14QhoxhLPAbQcEFUV2fsjGHb6HrlEOS47"
    "WgjKCu_0xxKhgAA"
)
AWS_SECRET = "KbnHFbDfj3u+ypO09RnKw1zW9/ohP46PbmT1TOkz"
PROMPT = "Fix the cart discount rounding and note how to run the tests."
ANSWER = "Cart totals now round after the discount; NOTES.md says how to run the tests."
PATCH = """*** Begin Patch
*** Update File: src/cart.py
@@
 def total(prices):
-    return round(sum(prices) * 0.9, 2)
+    discounted = sum(prices) * 0.9
+    return round(discounted, 2)
*** End Patch
"""
NEW_FILE = """*** Begin Patch
*** Add File: NOTES.md
+Run the tests with `python -m pytest -q`.
*** End Patch
"""
BAD_PATCH = """*** Begin Patch
*** Update File: src/checkout.py
@@
-pass
+total = 0
*** End Patch
"""


def _shell(cmd: str) -> FunctionCall:
    return FunctionCall(name="exec_command", arguments={"cmd": cmd})


FIRST_SESSION = [
    _shell("cat src/cart.py"),
    _shell("git status --short"),
    CustomCall(name="apply_patch", input=PATCH),
    CustomCall(name="apply_patch", input=NEW_FILE),
    CustomCall(name="apply_patch", input=BAD_PATCH),  # does not apply: Codex runs no hook
    _shell("cat config/settings.yml"),  # no such file: exits 1, marked failed
    _shell("grep -rn total src tests"),
    # Codex defers MCP tools behind tool_search for gpt-5 models: find memq's, then call it.
    ToolSearch(query="memq search memories"),
    FunctionCall(namespace="mcp__memq", name="search", arguments={"query": "cart"}),
    _shell("cat .env"),
    Message(text=ANSWER),
]
# Every call but memq's own MCP call is one observation; the failed patch is read back from
# Codex's rollout at Stop, since no PostToolUse hook reports it.
OBSERVED_CALLS = 8
CONTEXT_ATTEMPTS = 3


async def _stream_events(redis_url: str, stack: AgentStack, session: str) -> list[Event]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        entries = await client.xrange(Keys(stack.settings.prefix).events(session))
    finally:
        await client.aclose()
    return [decode_event(fields[b"event"]) for _, fields in entries]


def _latest_prompt(stack: AgentStack, session: str) -> str | None:
    async def read() -> str | None:
        store = sqlite_store(stack.settings)
        try:
            row = await store.latest_prompt(session)
        finally:
            await store.aclose()
        return row.prompt_text if row else None

    return asyncio.run(read())


def test_codex_sessions_are_remembered_and_the_next_session_gets_the_context(
    tmp_path: Path,
    redis_url: str,
    fake_observer: FakeObserver,
    fake_responses: FakeResponses,
) -> None:
    with sync_redis.Redis.from_url(redis_url) as client:
        client.flushdb()  # stored_bytes reads the whole database
    stack = AgentStack(tmp_path, redis_url, fake_observer)
    try:
        (stack.project / ".env").write_text(
            f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
        )
        codex_home = write_codex_config(stack, fake_responses.base_url)
        # The (empty) store a worker run creates: memq's MCP search needs one to answer, and
        # Codex runs no PostToolUse hook for an MCP call that failed.
        stack.create_store()
        fake_responses.script(*FIRST_SESSION)
        first = codex_exec(stack, codex_home, PROMPT)
        session = first[0]["thread_id"]
        # The worker starts after the session, so every event the hooks published is still
        # in the session's stream (the worker deletes what it has consumed).
        published = asyncio.run(_stream_events(redis_url, stack, session))
        _check_published(published, session)
        _check_no_secret(asyncio.run(_everything_in(redis_url)), fake_observer)

        stack.start_worker()
        rows = stack.wait_for(observations=OBSERVED_CALLS, summaries=1)
        _check_stored(stack, session, rows, fake_observer)

        # The SessionStart hook gives up on the context rather than hold the agent past its
        # one-second budget, which a loaded machine can exhaust: a few sessions may be tried.
        later: list[str] = []
        context = ""
        while ANSWER[:60] not in context and len(later) < CONTEXT_ATTEMPTS:
            fake_responses.script(
                ToolSearch(query="memq search memories"),
                FunctionCall(namespace="mcp__memq", name="search", arguments={"query": "cart"}),
                Message(text="The cart now rounds after the discount."),
            )
            events = codex_exec(stack, codex_home, "What changed in the cart last time?")
            later.append(events[0]["thread_id"])
            requests = [r for r in fake_responses.requests if r.conversation == later[-1]]
            context = "\n".join(requests[0].messages("developer"))
            # memq's MCP search answered from the store with the first session's notes.
            answers = {k: v for r in requests for k, v in r.tool_outputs().items()}
            assert any("<memq-notes>" in v for v in answers.values()), answers
        # memq's SessionStart output reached the model as a developer message.
        assert ANSWER[:60] in context, f"no memq context in {len(later)} sessions"
        assert session not in later
        stack.wait_for(observations=OBSERVED_CALLS, summaries=1 + len(later))
        for other in later:
            assert [r.kind for r in stack.stored(other)] == ["summary"]
        # Every session's memq MCP call was consumed without an observation.
        assert asyncio.run(_own_tool_count(redis_url, stack)) == 1 + len(later)
        _check_no_secret(asyncio.run(_everything_in(redis_url)), fake_observer)
        # Nor memq's data dir (the SQLite store and its WAL, the spool, logs).
        on_disk = b"".join(p.read_bytes() for p in stack.data_dir.rglob("*") if p.is_file())
        for secret in (ANTHROPIC_KEY, AWS_SECRET):
            assert secret.encode() not in on_disk
    finally:
        stack.close()


def _check_published(events: list[Event], session: str) -> None:
    assert {e.agent for e in events} == {"codex"}
    assert {e.memory_session_id for e in events} == {session}
    assert {e.project for e in events} == {"webapp"}
    kinds = [type(e).__name__ for e in events]
    assert [kinds[0], *kinds[-2:]] == ["Prompt", "Summarize", "End"], kinds
    calls = [e for e in events if isinstance(e, ToolCall)]
    # The hooks' calls, then (from the rollout at Stop) the one no hook reported; the Stop
    # copies of the others were dropped by event id.
    assert [(c.tool_name, c.failed) for c in calls] == [
        ("Bash", False), ("Bash", False), ("apply_patch", False), ("apply_patch", False),
        ("Bash", True), ("Bash", False), ("mcp__memq__search", False), ("Bash", False),
        ("apply_patch", True),
    ]  # fmt: skip
    assert len({c.event_id for c in calls}) == len(calls)
    assert "src/checkout.py" in calls[-1].tool_input["command"]
    assert "apply_patch verification failed" in calls[-1].tool_output
    assert calls[0].tool_input == {"command": "cat src/cart.py"}
    assert "def total(prices)" in str(calls[0].tool_output)
    assert "Add File: NOTES.md" in calls[3].tool_input["command"]
    assert "No such file" in str(calls[4].tool_output)
    (summary,) = [e for e in events if isinstance(e, Summarize)]
    assert summary.last_assistant_message == ANSWER
    (prompt,) = [e for e in events if isinstance(e, Prompt)]
    assert prompt.prompt_text == PROMPT


def _check_no_secret(redis_bytes: bytes, observer: FakeObserver) -> None:
    shown = json.dumps([r.body for r in observer.requests])
    for secret in (ANTHROPIC_KEY, AWS_SECRET):
        assert secret.encode() not in redis_bytes
        assert secret not in shown


def _check_stored(
    stack: AgentStack, session: str, rows: list[StoredRow], observer: FakeObserver
) -> None:
    observations = [r for r in rows if r.kind == "observation"]
    assert len(observations) == OBSERVED_CALLS, [r.title for r in observations]
    assert {r.project for r in rows} == {"webapp"}
    assert {r.memory_session_id for r in rows} == {session}
    (summary,) = [r for r in rows if r.kind == "summary"]
    assert summary.request == PROMPT
    assert summary.learned
    assert ANSWER.startswith(summary.learned[:60])
    assert _latest_prompt(stack, session) == PROMPT
    # The observer saw each real call and never memq's own one.
    shown = "\n".join(r.user for r in observer.requests)
    for text in ("cat src/cart.py", "git status --short", "Add File: NOTES.md",
                 "config/settings.yml", "grep -rn total", "cat .env"):  # fmt: skip
        assert text in shown, text
    assert "mcp__memq__search" not in shown
    assert '<outcome failed="true">apply_patch verification failed' in shown
    assert '<outcome failed="true">cat: config/settings.yml: No such file' in shown


async def _own_tool_count(redis_url: str, stack: AgentStack) -> int:
    client = aioredis.Redis.from_url(redis_url)
    try:
        counts = await outcomes(client, stack.settings)
    finally:
        await client.aclose()
    return counts.get("skipped:own-tool", 0)


async def _everything_in(redis_url: str) -> bytes:
    client = aioredis.Redis.from_url(redis_url)
    try:
        return await stored_bytes(client)
    finally:
        await client.aclose()


def test_codex_exec_skips_hooks_nobody_trusted_and_says_nothing(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver, fake_responses: FakeResponses
) -> None:
    # Why docs/agents/codex.md has the user trust the hooks once in the TUI.
    with sync_redis.Redis.from_url(redis_url) as client:
        client.flushdb()
        stack = AgentStack(tmp_path, redis_url, fake_observer)
        try:
            codex_home = write_codex_config(stack, fake_responses.base_url)
            fake_responses.script(_shell("cat README.md"), Message(text="A tiny shop backend."))
            events = codex_exec(stack, codex_home, "What is this?", bypass_hook_trust=False)
        finally:
            stack.close()
        ran = [e["item"] for e in events if e["type"] == "item.completed"]
        assert [i["type"] for i in ran] == ["command_execution", "agent_message"]
        assert "hook" not in json.dumps(events).lower()  # not a word about skipping them
        assert client.keys("*") == []  # no hook published anything
