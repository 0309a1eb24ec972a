"""What the agents report beyond a plain successful call: failures, and memq's own MCP tools."""

from __future__ import annotations

from pathlib import Path

from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver
from tests.support.worker_checks import observations, outcomes, unacked
from tests.support.worker_harness import (
    drain,
    make_settings,
    prompt,
    publish,
    running_runtime,
    summarize,
    tool_call,
)

NOTES = "<memq-notes>\n#12 Cart rounding fixed: round after tax\n</memq-notes>"


async def test_memqs_own_mcp_calls_are_consumed_counted_and_never_shown(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url, mcp_server_names="memq,notes")
    own = [
        tool_call("s1", 1, tool="mcp__memq__search", tool_input={"query": "cart"}, output=NOTES),
        tool_call("s1", 2, tool="mcp__notes__timeline", tool_input={"anchor": 12}, output=NOTES),
    ]
    real = tool_call("s1", 3, tool_input={"command": "pytest -q"}, output="5 passed")
    last = tool_call("s1", 4, tool="mcp_memq_search", tool_input={"query": "x"}, output=NOTES)
    await publish(arq_redis, settings, prompt("s1", 1, "fix the cart"), *own, real, last,
                  summarize("s1"))  # fmt: skip
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    shown = "\n".join(r.user for r in fake_observer.requests)
    assert "pytest -q" in shown
    assert "mcp__memq__search" not in shown
    assert "mcp_memq_search" not in shown
    assert "mcp__notes__timeline" not in shown
    assert "Cart rounding" not in shown
    assert "fix the cart" in shown  # the request the own calls rode with still reaches it
    assert len(await observations(settings, "s1")) == 1
    counts = await outcomes(arq_redis, settings)
    assert counts["skipped:own-tool"] == 3
    assert await unacked(arq_redis, settings, "s1") == (0, 0)


async def test_a_failed_call_is_framed_as_failed_for_the_observer(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    error = "Exit code 1\n1 failed"
    failing = tool_call("s2", 1, tool_input={"command": "pytest -q"}, output=error, failed=True)
    passing = tool_call("s2", 2, tool_input={"command": "ls"}, output="a b")
    await publish(arq_redis, settings, prompt("s2", 1, "run the tests"), failing, passing)
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    (request,) = fake_observer.requests
    assert request.user.count('<outcome failed="true">Exit code 1') == 1
    assert "<outcome>a b</outcome>" in request.user
    # The mode tells the observer what the attribute means.
    assert "holds the error of a call that failed" in request.system + request.user
    assert len(await observations(settings, "s2")) == 2
