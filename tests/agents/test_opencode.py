"""The real OpenCode 1.18.33 with memq's plugin and MCP server, against a real memq, offline.

OpenCode talks to a scripted Chat Completions fake; the plugin posts to `memq agent` (or,
when that is down, runs `memq hook opencode`); a `memq worker` process observes with the
fake observer and stores in SQLite.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.agent_models.chat_completions import (
    ChatCompletionsModel,
    chat_completions_model,
    say,
    tool,
)
from tests.support.agent_stack import AgentStack, agent_stack
from tests.support.fake_observer import FakeObserver
from tests.support.ingest import closed_port_url, stored_bytes
from tests.support.opencode_run import (
    INSTALL_FAILED,
    configure_opencode,
    opencode_log,
    redis_commands,
    run_opencode,
)
from tests.support.ports import free_port
from tests.support.worker_checks import outcomes
from tests.support.worker_harness import sqlite_store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

# The calls memq records, by the tool name its observation is titled with; memq_search is
# memq's own MCP tool.
REAL_CALLS = Counter({"read": 3, "bash": 2, "edit": 1, "write": 1, "grep": 1})
OBSERVED = r"<observed_from_primary_session>.*?</observed_from_primary_session>"
CONTEXT_HEADING = "# memq: what happened recently in webapp"


@pytest.fixture(name="model")
def _fix_model() -> Iterator[ChatCompletionsModel]:
    with chat_completions_model() as model:
        yield model


def _secret() -> str:
    return base64.b64encode(os.urandom(30)).decode()  # 40 characters, like an AWS secret key


def _script_first_session(model: ChatCompletionsModel, project: Path) -> None:
    model.script(
        "SESSION-ONE",
        tool("read", filePath=str(project / "src" / "cart.py")),
        tool("bash", command="ls src tests", description="List the sources"),
        tool("edit", filePath=str(project / "src" / "cart.py"), oldString="0.9", newString="0.8"),
        tool("write", filePath=str(project / "NOTES.md"), content="Discount is now 20%.\n"),
        tool("bash", command="test -e no-such-file", description="Check for a file"),
        tool("grep", pattern="def total", path=str(project)),
        # A tool that throws runs no tool.execute.after: the plugin takes its error part.
        tool("read", filePath=str(project / "docs" / "missing.md")),
        tool("memq_search", query="cart discount"),
        tool("read", filePath=str(project / ".env")),
        say("Done: the cart discount is 20% now, noted in NOTES.md."),
    )


def _main_requests(model: ChatCompletionsModel, marker: str) -> list[str]:
    return [r.system for r in model.requests if not r.side and marker in r.first_user]


def _titles(stack: AgentStack, session: str) -> Counter[str]:
    rows = [r for r in stack.stored(session) if r.kind == "observation"]
    return Counter((r.title or "").split(":", 1)[0] for r in rows)


def _prompt_of(stack: AgentStack, session: str) -> str:
    async def read() -> str:
        store = sqlite_store(stack.settings)
        try:
            row = await store.latest_prompt(session)
        finally:
            await store.aclose()
        return row.prompt_text if row else ""

    return asyncio.run(read())


def _wait_for_xadd(commands: list[str], fragment: str, timeout_s: float = 10) -> list[str]:
    """The XADDs holding `fragment` among the MONITORed commands, once there is one."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = [c for c in list(commands) if "XADD" in c.upper() and fragment in c]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _tool_result(model: ChatCompletionsModel, tool_name: str) -> str | None:
    """What the agent sent back to the model for its first call of `tool_name`."""
    for request in model.requests:
        messages = request.body.get("messages", [])
        ids = {
            call["id"]
            for m in messages
            for call in m.get("tool_calls") or []
            if call["function"]["name"] == tool_name
        }
        for m in messages:
            if m.get("role") == "tool" and m.get("tool_call_id") in ids:
                return str(m.get("content"))
    return None


async def _outcome(stack: AgentStack, url: str, name: str) -> int:
    client = aioredis.Redis.from_url(url)
    try:
        return (await outcomes(client, stack.settings)).get(name, 0)
    finally:
        await client.aclose()


async def _redis_bytes(url: str) -> bytes:
    client = aioredis.Redis.from_url(url)
    try:
        return await stored_bytes(client)
    finally:
        await client.aclose()


def test_opencode_sessions_are_stored_and_the_next_one_starts_with_their_context(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver, model: ChatCompletionsModel
) -> None:
    secret = _secret()
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        (stack.project / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={secret}\nDEBUG=1\n")
        configure_opencode(stack, model.base_url)
        endpoint = stack.start_agent_endpoint()
        _script_first_session(model, stack.project)
        model.script("SESSION-TWO", say("The discount is 20%, as the last session left it."))

        with redis_commands(redis_url) as commands:
            first = run_opencode(stack, "SESSION-ONE: lower the cart discount to 20%", endpoint)
            assert first.returncode == 0, first.stdout + first.stderr
            rows = stack.wait_for(observations=sum(REAL_CALLS.values()), summaries=1)
            # OpenCode's dispose: the session's end, published behind the summary.
            ends = _wait_for_xadd(commands, '\\"kind\\":\\"end\\"')
            assert len(ends) == 1
            assert '\\"reason\\":\\"dispose\\"' in ends[0]

        # OpenCode loaded the plugin without the registry: it never tried to install.
        assert INSTALL_FAILED not in opencode_log(stack)
        (session,) = {r.memory_session_id for r in rows}
        assert session.startswith("ses_")
        assert {r.project for r in rows} == {"webapp"}
        # One observation per real call; memq's own MCP call was answered but never observed.
        assert _titles(stack, session) == REAL_CALLS
        answer = _tool_result(model, "memq_search")
        assert answer is not None
        assert "error" not in answer.lower(), answer
        assert asyncio.run(_outcome(stack, redis_url, "skipped:own-tool")) == 1
        shown = "\n".join(r.user for r in fake_observer.requests)
        calls = re.findall(OBSERVED, shown, re.S)
        failed = [c for c in calls if '<outcome failed="true">' in c]
        assert len(failed) == 2, failed
        assert "test -e no-such-file" in failed[0]  # exit 1
        assert "missing.md" in failed[1]
        assert "File not found" in failed[1]
        (summary,) = [r for r in rows if r.kind == "summary"]
        assert "SESSION-ONE: lower the cart discount" in (summary.request or "")
        assert "the cart discount is 20% now" in (summary.learned or "")
        assert "SESSION-ONE: lower the cart discount to 20%" in _prompt_of(stack, session)
        # The files were really changed by OpenCode's tools.
        assert "0.8" in (stack.project / "src" / "cart.py").read_text()
        assert (stack.project / "NOTES.md").read_text() == "Discount is now 20%.\n"

        # Every event went to Redis labelled as OpenCode's; the two failing calls as failed.
        published = [c for c in commands if "XADD" in c.upper() and "tool_call" in c]
        assert len(published) >= sum(REAL_CALLS.values()) + 1
        assert all('\\"agent\\":\\"opencode\\"' in c for c in published), published[:1]
        assert sum('\\"failed\\":true' in c for c in published) == 2
        # The planted secret was read by the agent (the model saw it) but never reached memq's
        # Redis or observer.
        assert any(secret in json.dumps(r.body) for r in model.requests)
        assert secret not in "\n".join(commands)
        assert secret.encode() not in asyncio.run(_redis_bytes(redis_url))
        assert all(secret not in r.user and secret not in r.system for r in fake_observer.requests)
        # Nothing was stored before the first session: its system prompt has no memq context.
        assert not any(CONTEXT_HEADING in s for s in _main_requests(model, "SESSION-ONE"))

        second = run_opencode(stack, "SESSION-TWO: what is the discount now?", endpoint)
        assert second.returncode == 0, second.stdout + second.stderr
        systems = _main_requests(model, "SESSION-TWO")
        assert systems
        assert all(CONTEXT_HEADING in s for s in systems)
        first_call = 'bash: { "command": "ls src tests"'  # an observation of the first session
        assert all("<memq-notes" in s and first_call in s for s in systems), systems[0][-3000:]
        assert "the cart discount is 20% now" in systems[0]  # the first session's summary


def test_with_memq_agent_down_the_plugin_falls_back_to_the_command_hook_and_its_spool(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver, model: ChatCompletionsModel
) -> None:
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        configure_opencode(stack, model.base_url)
        for marker in ("SESSION-THREE", "SESSION-FOUR"):
            model.script(
                marker,
                tool("bash", command=f"echo {marker}", description="Say the marker"),
                say(f"Printed {marker}."),
            )
        down = f"http://127.0.0.1:{free_port()}"  # nothing listens: no `memq agent`
        run = run_opencode(stack, "SESSION-THREE: print the marker", down)
        assert run.returncode == 0, run.stdout + run.stderr
        rows = stack.wait_for(observations=1, summaries=1)
        (third,) = {r.memory_session_id for r in rows}
        assert _titles(stack, third) == Counter({"bash": 1})
        assert "SESSION-THREE: print the marker" in _prompt_of(stack, third)
        assert {r.project for r in rows} == {"webapp"}

        # Redis down too: `memq hook opencode` spools, and a flush later stores the session.
        no_redis = closed_port_url()
        run = run_opencode(stack, "SESSION-FOUR: print the marker", down, MEMQ_REDIS_URL=no_redis)
        assert run.returncode == 0, run.stdout + run.stderr
        assert len(stack.stored()) == len(rows)  # nothing reached the worker
        # The context came from `memq hook opencode` (it reads the store, not Redis).
        systems = _main_requests(model, "SESSION-FOUR")
        assert systems
        assert all(CONTEXT_HEADING in s and "SESSION-THREE" in s for s in systems)
        flushed = stack.run_memq("spool", "flush")
        assert flushed.returncode == 0, flushed.stdout + flushed.stderr
        rows = stack.wait_for(observations=2, summaries=2)
        (fourth,) = {r.memory_session_id for r in rows} - {third}
        assert _titles(stack, fourth) == Counter({"bash": 1})
        assert "SESSION-FOUR: print the marker" in _prompt_of(stack, fourth)
