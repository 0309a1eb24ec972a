"""The command hook's relay: with `memq agent` running, the hook hands it the payload and
exits once the agent has spooled the events (worker/ingest/relay.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.agent_stack import AgentStack, agent_stack
from tests.support.fake_observer import FakeObserver

pytestmark = pytest.mark.slow  # a worker and a `memq agent` process

REAL = Path(__file__).resolve().parents[2] / "data" / "claude_code" / "2.1.328"
# The hook's own path refuses this setting; the relay never reads the hook's settings. So an
# event recorded under it can only have gone through the agent.
BROKEN = {"MEMQ_MAX_EVENT_BYTES": "not-a-number"}


def _payload(name: str, stack: AgentStack) -> str:
    payload = json.loads((REAL / name).read_text())
    payload.update(cwd=str(stack.project), transcript_path=None)
    return json.dumps(payload)


def _hook(stack: AgentStack, stdin: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [stack.memq, "hook", "claude-code"], input=stdin, capture_output=True, text=True,
        timeout=30, cwd=stack.project, env=stack.env(**env), check=False,
    )  # fmt: skip


def test_a_running_agent_takes_the_hooks_events_and_answers_session_start(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver
) -> None:
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        port = stack.start_agent_endpoint().rsplit(":", 1)[1]
        started = time.monotonic()
        done = _hook(
            stack, _payload("PostToolUse-Bash.json", stack), MEMQ_AGENT_PORT=port, **BROKEN
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert time.monotonic() - started < 1.0
        (row,) = [r for r in stack.wait_for(observations=1) if r.kind == "observation"]
        assert row.project == "webapp"
        # SessionStart: the agent's answer is the context, printed by the hook.
        done = _hook(stack, _payload("SessionStart-startup.json", stack), MEMQ_AGENT_PORT=port,
                     **BROKEN)  # fmt: skip
        assert done.returncode == 0
        context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "memq-notes" in context


async def test_the_agent_of_another_memq_is_not_used(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, fake_observer: FakeObserver
) -> None:
    with agent_stack(tmp_path, redis_url, fake_observer) as stack:
        port = stack.start_agent_endpoint().rsplit(":", 1)[1]
        # Another prefix is another memq: the agent refuses (409), the hook publishes itself.
        done = _hook(stack, _payload("PostToolUse-Bash.json", stack), MEMQ_AGENT_PORT=port,
                     MEMQ_PREFIX="other")  # fmt: skip
        assert (done.returncode, done.stderr) == (0, "")
        assert [k async for k in redis.scan_iter("other:events:*")]
        assert not [k async for k in redis.scan_iter("memq:events:*")]
