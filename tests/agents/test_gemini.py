"""The real Gemini CLI (0.61.0) against memq: its hooks and MCP wired from docs/agents/gemini.md.

Gemini talks to a scripted fake Gemini API on loopback and really runs its tools in a
throwaway git project; its hooks run the `memq` console script against a real redis-server
and `memq worker` (tests/support/agent_stack.py, tests/support/gemini_agent.py).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from pipeline.events import ToolCall, decode_event
from tests.support.agent_models.gemini import FakeGemini, Step, answer, call, parallel
from tests.support.agent_models.gemini import fake_gemini_fixture as _fix_fake_gemini  # noqa: F401
from tests.support.agent_stack import AgentStack, agent_stack
from tests.support.fake_observer import FakeObserver
from tests.support.gemini_agent import (
    OFFLINE_SETTINGS,
    configure_gemini,
    documented_blocks,
    run_gemini,
    with_memq_path,
)
from tests.support.ingest import stored_bytes
from tests.support.worker_checks import outcomes
from worker.keys import Keys

pytestmark = pytest.mark.slow

ANTHROPIC_KEY = (
    "sk-ant-api03-"
    + "Xq7vR2mK9pL4sT8wY1zB6nC3dF5gH0jQaE2rT6yU8iO1pA3sD5fG7hJ9kL2zX4cV6bN8mQ0wE-AbCdEfAA"
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2vT8kLm"
FIRST_PROMPT = "Give the cart a 15% discount and note how to run the tests."
SECOND_PROMPT = "What did we change in the cart last time?"
RESUMED_PROMPT = "And which tests cover it?"


def first_session(project: Path) -> list[Step]:
    """Every kind of tool call: read, shell, edit, write, a failing shell, two searches at
    once, memq's MCP search, a refused read and a read of secrets."""
    return [
        call("read_file", file_path="README.md"),
        call("run_shell_command", command="ls src tests", description="List the sources"),
        call(
            "replace",
            file_path=str(project / "src" / "cart.py"),
            old_string="* 0.9",
            new_string="* 0.85",
            instruction="Give a 15% discount instead of 10%.",
        ),
        call("write_file", file_path=str(project / "NOTES.md"), content="Run `pytest -q`.\n"),
        call("run_shell_command", command="grep -c TODO README.md", description="Count TODOs"),
        parallel(call("grep_search", pattern="def total"), call("glob", pattern="**/*.py")),
        call("mcp_memq_search", query="cart discount"),
        call("read_file", file_path=".env"),  # refused by Gemini before it runs: no hook
        call("read_file", file_path="deploy/prod.env"),
        answer("Done: the cart now takes 15% off, and NOTES.md says how to run the tests."),
    ]


REAL_TOOLS = ["read_file", "run_shell_command", "replace", "write_file", "run_shell_command",
              "grep_search", "glob", "read_file"]  # fmt: skip


@pytest.fixture(name="gemini_stack")
def _fix_gemini_stack(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver, fake_gemini: FakeGemini
) -> Iterator[AgentStack]:
    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()
    # No worker yet: the first session's events are read in Redis before one starts.
    with agent_stack(tmp_path, redis_url, fake_observer, worker=False) as stack:
        secrets = f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
        (stack.project / ".env").write_text(secrets)
        (stack.project / "deploy").mkdir()
        (stack.project / "deploy" / "prod.env").write_text(secrets)
        configure_gemini(stack)
        yield stack


def stream_events(stack: AgentStack, session: str) -> list[Any]:
    """The events in the session's Redis stream, decoded."""
    with redis.Redis.from_url(stack.redis_url) as client:
        entries = client.xrange(Keys(stack.settings.prefix).events(session))
    return [decode_event(fields[b"event"]) for _, fields in entries]


def redis_bytes(url: str) -> bytes:
    """Every key and value in Redis (tests/support/ingest.py `stored_bytes`)."""

    async def read() -> bytes:
        client = aioredis.Redis.from_url(url)
        try:
            return await stored_bytes(client)
        finally:
            await client.aclose()

    return asyncio.run(read())


def stored_prompts(stack: AgentStack, session: str) -> list[tuple[str, str]]:
    """(project, prompt_text) of each prompt the worker stored for the session."""
    with closing(sqlite3.connect(f"file:{stack.data_dir / 'memq.db'}?mode=ro", uri=True)) as db:
        query = (
            "SELECT project, prompt_text FROM user_prompts WHERE memory_session_id = ? ORDER BY id"
        )
        return [(str(p), str(t)) for p, t in db.execute(query, (session,))]


def test_gemini_sessions_are_recorded_and_the_next_one_gets_the_context(
    gemini_stack: AgentStack, fake_gemini: FakeGemini, fake_observer: FakeObserver
) -> None:
    stack = gemini_stack
    # The worker is held back for the first session, so its events can be read in Redis; the
    # store a worker run makes is there, or `memq mcp` answers the model that memq has no
    # database.
    stack.create_store()
    fake_gemini.script(first_session(stack.project))
    out = run_gemini(stack, fake_gemini, FIRST_PROMPT)
    session = out["session_id"]
    assert out["response"].startswith("Done: the cart now takes 15% off")
    # Every scripted step was answered, and the agent really ran the calls.
    assert [r.step for r in fake_gemini.agent_requests()] == list(range(10))
    assert "0.85" in (stack.project / "src" / "cart.py").read_text()
    assert (stack.project / "NOTES.md").read_text() == "Run `pytest -q`.\n"

    # A hook that ran out of its second under load spooled its event for the next hook to
    # send; nothing comes after the last one, so send what waits, as `memq spool flush` does.
    assert stack.run_memq("spool", "flush").returncode == 0
    events = stream_events(stack, session)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Prompt", *["ToolCall"] * 9, "Summarize", "End"], kinds
    assert {e.agent for e in events} == {"gemini"}
    assert {e.project for e in events} == {"webapp"}
    calls = [e for e in events if isinstance(e, ToolCall)]
    # The read of `.env` Gemini refused before running it has no hook, so no event.
    # The two searches ran at once: their hooks' events may land in either order.
    names = [c.tool_name for c in calls]
    assert names[:5] == REAL_TOOLS[:5]
    assert sorted(names[5:7]) == ["glob", "grep_search"]
    assert names[7:] == ["mcp_memq_search", "read_file"]
    failing = calls[4]
    assert (failing.failed, failing.tool_output) == (True, "Output: 0\nExit Code: 1")
    assert [c.tool_name for c in calls if c.failed] == ["run_shell_command"], calls
    # Edits and writes keep the diff, not the whole file Gemini answered the model.
    assert "-    return round(sum(prices) * 0.9, 2)" in calls[2].tool_output
    assert calls[3].tool_output.startswith("Successfully created and wrote to new file")
    assert "pytest -q" not in calls[3].tool_output
    stored = redis_bytes(stack.redis_url)
    assert ANTHROPIC_KEY.encode() not in stored
    assert AWS_SECRET.encode() not in stored
    assert b"[REDACTED:anthropic-api-key]" in stored

    stack.start_worker()
    rows = stack.wait_for(observations=len(REAL_TOOLS), summaries=1, timeout_s=90)
    observations = [r for r in rows if r.kind == "observation"]
    # One per call (the fake observer titles each after its tool); memq's own MCP call none.
    assert sorted(str(r.title).split(":")[0] for r in observations) == sorted(REAL_TOOLS)
    assert {r.project for r in rows} == {"webapp"}
    assert stored_prompts(stack, session) == [("webapp", FIRST_PROMPT)]
    counts = asyncio.run(_outcomes(stack))
    assert counts.get("skipped:own-tool") == 1, counts
    shown = "\n".join(r.system + r.user for r in fake_observer.requests)
    assert ANTHROPIC_KEY not in shown
    assert AWS_SECRET not in shown
    assert "mcp_memq_search" not in shown
    assert FIRST_PROMPT in shown

    # The next session starts with the first one's memories in its prompt.
    before = len(fake_gemini.requests)
    fake_gemini.script([answer("Last time the cart discount went from 10% to 15%.")])
    second = run_gemini(stack, fake_gemini, SECOND_PROMPT)["session_id"]
    first_request = next(r for r in fake_gemini.requests[before:] if r.step == 0)
    titles = [str(r.title) for r in observations]
    assert any(t in first_request.text for t in titles), "no stored memory reached the model"
    assert "<hook_context>" in first_request.text
    assert stack.run_memq("spool", "flush").returncode == 0
    stack.wait_for(observations=len(REAL_TOOLS), summaries=2, timeout_s=90)
    # The prompt is stored as the user typed it, without the context Gemini put before it,
    # and memq's notes never reached the observer as if they were the user's words.
    assert stored_prompts(stack, second) == [("webapp", SECOND_PROMPT)]
    shown = "\n".join(r.system + r.user for r in fake_observer.requests)
    assert SECOND_PROMPT in shown
    assert "Notes memq derived" not in shown

    # Resumed, Gemini rebuilds the history without a user message that starts with
    # <hook_context>: the first prompt goes, context and all, so memq gives the context again.
    before = len(fake_gemini.requests)
    fake_gemini.script([answer("unused: the history holds this turn"), answer("Resumed.")])
    resumed = run_gemini(stack, fake_gemini, RESUMED_PROMPT, resume=True)
    request = next(r for r in fake_gemini.requests[before:] if r.step is not None)
    assert resumed["session_id"] == second  # Gemini goes on under the same session id
    contents = request.body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert SECOND_PROMPT not in json.dumps(contents[:2])  # dropped with its <hook_context>
    (new_turn,) = contents[-1]["parts"]
    assert new_turn["text"].startswith("<hook_context>")
    assert new_turn["text"].endswith(f"</hook_context>\n\n{RESUMED_PROMPT}")
    assert any(t in new_turn["text"] for t in titles)
    assert stack.run_memq("spool", "flush").returncode == 0
    stack.wait_for(observations=len(REAL_TOOLS), summaries=3, timeout_s=90)
    assert stored_prompts(stack, second) == [("webapp", SECOND_PROMPT), ("webapp", RESUMED_PROMPT)]


async def _outcomes(stack: AgentStack) -> dict[str, int]:
    client = aioredis.Redis.from_url(stack.redis_url)
    try:
        return await outcomes(client, stack.settings)
    finally:
        await client.aclose()


@pytest.mark.parametrize("scope", ["user", "project"])
def test_memq_install_writes_the_docs_blocks_and_a_session_is_captured(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver, fake_gemini: FakeGemini,
    scope: str,
) -> None:  # fmt: skip
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        home = stack.home / ".gemini"
        home.mkdir()
        (home / "settings.json").write_text(json.dumps(OFFLINE_SETTINGS))
        trusted = {str(stack.project): "TRUST_FOLDER"}
        (home / "trustedFolders.json").write_text(json.dumps(trusted))
        # A project install writes the project's .gemini/settings.json, beside the user's.
        flags = ["--project"] if scope == "project" else []
        gemini = home if scope == "user" else stack.project / ".gemini"
        kept: dict[str, Any] = OFFLINE_SETTINGS if scope == "user" else {}
        done = stack.run_memq("install", "gemini", *flags)
        assert done.returncode == 0, done.stderr
        written = json.loads((gemini / "settings.json").read_text())
        expected = dict(kept)
        for block in documented_blocks():
            expected |= with_memq_path(block, stack.memq)
        assert written == expected  # the user's own settings kept, memq's exactly the docs'
        fake_gemini.script([call("read_file", file_path="README.md"), answer("Read it.")])
        session = run_gemini(stack, fake_gemini, "Read the README")["session_id"]
        rows = stack.wait_for(observations=1, summaries=1, timeout_s=60)
        assert {r.memory_session_id for r in rows} == {session}
        assert stack.run_memq("uninstall", "gemini", *flags).returncode == 0
        path = gemini / "settings.json"
        left = json.loads(path.read_text()) if path.exists() else {}
        assert "memq" not in left.get("mcpServers", {})
        assert "memq hook" not in json.dumps(left.get("hooks", {}))
        assert {k: left[k] for k in kept} == kept
