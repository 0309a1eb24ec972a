"""The real Claude Code binary, offline against a scripted model, hooked into a real memq.

Claude Code really runs its tools (Read, Bash, Edit, Write, Grep, memq's MCP server) in a
throwaway git project and fires its real hooks, configured from docs/agents/claude-code.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.support.agent_bins import agent_binary
from tests.support.agent_models.anthropic import AnthropicAgentModel, Step, Text, ToolUse
from tests.support.agent_stack import AgentStack, agent_stack
from tests.support.fake_observer import FakeObserver
from tests.support.ingest import stored_bytes
from tests.support.worker_harness import sqlite_store

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents" / "claude-code.md"
FAILING = "python3 -c 'import sys; print(\"1 failed\"); sys.exit(1)'"
TOOLS = "Read,Bash,Edit,Write,Grep,Glob,ToolSearch,mcp__memq__search"


def doc_blocks() -> list[dict[str, Any]]:
    """The JSON blocks of the Claude Code page, in order: command hooks, HTTP hooks, MCP."""
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(), re.S)
    return [json.loads(b) for b in blocks]


def configure(stack: AgentStack, hooks: dict[str, Any], agent_url: str | None = None) -> None:
    """Write the page's settings into the agent's HOME, with this memq's full path."""
    text = json.dumps(hooks).replace('"memq hook', f'"{stack.memq} hook')
    if agent_url:
        text = text.replace("http://127.0.0.1:8766", agent_url)
    claude_dir = stack.home / ".claude"
    claude_dir.mkdir(parents=True, exist_ok=True)
    (claude_dir / "settings.json").write_text(text)
    mcp = json.loads(
        json.dumps(doc_blocks()[2]).replace('"command": "memq"', f'"command": "{stack.memq}"')
    )
    (stack.home / ".claude.json").write_text(json.dumps({**mcp, "hasCompletedOnboarding": True}))


def run_claude(stack: AgentStack, model: AnthropicAgentModel, prompt: str, *extra: str) -> str:
    """One `claude -p` session in the project; returns its session id."""
    done = subprocess.run(
        [str(agent_binary("claude-code")), "-p", prompt, "--output-format", "json",
         "--permission-mode", "acceptEdits", "--allowedTools", TOOLS, *extra],
        cwd=stack.project, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
        env=stack.env(ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-fake-local-0000",
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1"),
    )  # fmt: skip
    assert done.returncode == 0, f"claude exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return str(json.loads(done.stdout)["session_id"])


@pytest.fixture(name="model")
def _fix_model() -> Iterator[AnthropicAgentModel]:
    model = AnthropicAgentModel()
    yield model
    model.close()


def session_script(secret_file: str) -> list[Step]:
    return [
        ToolUse("Read", {"file_path": "README.md"}),
        ToolUse("Bash", {"command": "ls src tests", "description": "List the sources"}),
        ToolUse("Edit", {"file_path": "src/cart.py", "old_string": "0.9", "new_string": "0.95"}),
        ToolUse("Write", {"file_path": "notes/plan.md", "content": "# Plan\n\nRound after tax.\n"}),
        ToolUse("Bash", {"command": FAILING, "description": "Run the tests"}),
        ToolUse("Grep", {"pattern": "def total", "output_mode": "content"}),
        ToolUse("Read", {"file_path": "docs/missing.md"}),  # fires no hook at all
        ToolUse("Read", {"file_path": secret_file}),
        ToolUse("ToolSearch", {"query": "select:mcp__memq__search", "max_results": 1}),
        ToolUse("mcp__memq__search", {"query": "cart rounding"}),
        Text("Rounded after tax; one test still fails."),
    ]


def test_a_real_claude_code_session_is_captured_and_its_context_reaches_the_next(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_observer: FakeObserver,
    model: AnthropicAgentModel,
) -> None:  # fmt: skip
    aws_secret = secrets.token_urlsafe(30)[:40]
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        (stack.project / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={aws_secret}\nDEBUG=1\n")
        configure(stack, doc_blocks()[0])
        model.script = session_script(".env")
        session = run_claude(stack, model, "Fix the cart rounding")
        # Read x3, Bash x2, Edit, Write, Grep, ToolSearch: one observation each; memq's own
        # search is never observed.
        rows = stack.wait_for(observations=9, summaries=1, timeout_s=90)
        observed = [r for r in rows if r.kind == "observation"]
        assert len(observed) == 9
        assert {r.memory_session_id for r in rows} == {session}
        assert {r.project for r in rows} == {"webapp"}
        assert not any((r.title or "").startswith("mcp__memq") for r in observed)
        shown = "\n".join(r.user for r in fake_observer.requests)
        # The failing Bash (PostToolUseFailure), and the Read of a missing file, which fired
        # no hook at all: published from the transcript at Stop.
        calls = re.findall(
            r"<observed_from_primary_session>.*?</observed_from_primary_session>", shown, re.S
        )
        assert sum('<outcome failed="true">' in c for c in calls) == 2
        assert re.search(
            r'docs/missing\.md.*?<outcome failed="true">[^<]*File does not exist', shown, re.S
        )
        assert "1 failed" in shown
        assert "Fix the cart rounding" in shown
        assert aws_secret not in shown
        assert aws_secret not in asyncio.run(_redis_bytes(redis_url)).decode(errors="replace")
        mcp_answer = _tool_result(model, "mcp__memq__search")
        assert mcp_answer is not None
        assert not mcp_answer.get("is_error"), mcp_answer
        assert asyncio.run(_outcome(stack, redis_url, "skipped:own-tool")) == 1
        prompt = asyncio.run(_latest_prompt(stack, session))
        assert prompt == "Fix the cart rounding"

        model.script = [Text("We rounded the cart after tax.")]
        before = len(model.main_requests())
        run_claude(stack, model, "What did we change last time?")
        second = json.dumps(model.main_requests()[before:])
        assert "memq-notes" in second  # the first session's memories
        assert "Grep" in second


def test_the_http_hooks_of_the_docs_capture_a_session_and_session_start_still_injects(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_observer: FakeObserver,
    model: AnthropicAgentModel,
) -> None:  # fmt: skip
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        configure(stack, doc_blocks()[1], agent_url=stack.start_agent_endpoint())
        model.script = [
            ToolUse("Read", {"file_path": "src/cart.py"}),
            ToolUse("Bash", {"command": "exit 3", "description": "Fail"}),
            Text("Read it."),
        ]
        session = run_claude(stack, model, "Look at the cart")
        rows = stack.wait_for(observations=2, summaries=1, timeout_s=60)
        assert {r.memory_session_id for r in rows} == {session}
        model.script = [Text("ok")]
        before = len(model.main_requests())
        run_claude(stack, model, "Again")
        # SessionStart is a command hook even in the HTTP set-up: the context arrives.
        assert "memq-notes" in json.dumps(model.main_requests()[before:])


def _tool_result(model: AnthropicAgentModel, tool: str) -> dict[str, Any] | None:
    """The result block the agent sent back for its first call of `tool`."""
    ids: set[str] = set()
    for request in model.main_requests():
        for message in request.get("messages", []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_use" and block.get("name") == tool:
                    ids.add(block["id"])
                if block.get("type") == "tool_result" and block.get("tool_use_id") in ids:
                    return dict(block)
    return None


async def _outcome(stack: AgentStack, url: str, name: str) -> int:
    from tests.support.worker_checks import outcomes

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


async def _latest_prompt(stack: AgentStack, session: str) -> str | None:
    store = sqlite_store(stack.settings)
    try:
        row = await store.latest_prompt(session)
    finally:
        await store.aclose()
    return row.prompt_text if row else None


@pytest.mark.parametrize("http", [False, True], ids=["command", "http"])
def test_memq_install_writes_the_docs_blocks_and_a_real_session_is_captured(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_observer: FakeObserver,
    model: AnthropicAgentModel, http: bool,
) -> None:  # fmt: skip
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        url = stack.start_agent_endpoint() if http else None
        port = url.rsplit(":", 1)[1] if url else "8766"
        flags = ["--http"] if http else []
        done = stack.run_memq("install", "claude-code", *flags, MEMQ_AGENT_PORT=port)
        assert done.returncode == 0, done.stderr
        written = json.loads((stack.home / ".claude" / "settings.json").read_text())
        expected = json.dumps(doc_blocks()[1 if http else 0]).replace(
            '"memq hook', f'"{stack.memq} hook'
        )
        assert written == json.loads(expected.replace("127.0.0.1:8766", f"127.0.0.1:{port}"))
        mcp = json.loads((stack.home / ".claude.json").read_text())
        assert mcp == json.loads(
            json.dumps(doc_blocks()[2]).replace('"command": "memq"', f'"command": "{stack.memq}"')
        )
        model.script = [ToolUse("Read", {"file_path": "README.md"}), Text("Read it.")]
        session = run_claude(stack, model, "Read the README")
        rows = stack.wait_for(observations=1, summaries=1, timeout_s=60)
        assert {r.memory_session_id for r in rows} == {session}
        assert stack.run_memq("uninstall", "claude-code").returncode == 0
        # install created settings.json: uninstall deletes it; Claude Code keeps its own state in
        # ~/.claude.json, which keeps everything but memq's server
        assert not (stack.home / ".claude" / "settings.json").exists()
        state = json.loads((stack.home / ".claude.json").read_text())
        assert "memq" not in state.get("mcpServers", {})
        assert len(state) > 1
