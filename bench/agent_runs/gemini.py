"""Gemini CLI: `gemini -p` against tests/support/agent_models/gemini.py, the hooks of
docs/agents/gemini.md (command hooks only). GEMINI_DEBUG_LOG_FILE logs each hook event's
duration ("Hook execution for AfterTool: 1 hooks executed successfully, total duration:
74ms")."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.agent_runs import COMMAND, NO_HOOKS, READ_FILE, AgentRunner, Session
from bench.agent_runs import shell_command as shell
from tests.support.agent_models.gemini import FakeGemini, Step, answer, call
from tests.support.agent_stack import AgentStack
from tests.support.gemini_agent import configure_gemini, run_gemini

_HOOK_LINE = re.compile(r"Hook execution for (\w+): .*total duration: (\d+)ms")


def script(calls: int) -> list[Step]:
    """`calls` tool calls, a shell command and a read in turn, then the answer."""
    steps = [
        call("read_file", file_path=READ_FILE)
        if i % 2
        else call("run_shell_command", command=shell(i), description="Echo")
        for i in range(calls)
    ]
    return [*steps, answer("Done.")]


@contextmanager
def _model() -> Iterator[FakeGemini]:
    model = FakeGemini()
    try:
        yield model
    finally:
        model.close()


def hook_times(log: Path) -> dict[str, list[float]]:
    """Each hook event's durations (ms) as the CLI's debug log states them."""
    times: dict[str, list[float]] = {}
    for m in _HOOK_LINE.finditer(log.read_text(errors="replace") if log.exists() else ""):
        times.setdefault(m[1], []).append(float(m[2]))
    return times


def session(stack: AgentStack, model: FakeGemini, setup: str, calls: int, scratch: Path) -> Session:
    # memq's MCP server is configured in both set-ups; only the hooks differ.
    configure_gemini(stack, hooks=setup == COMMAND)
    model.script(script(calls))
    log = scratch / "gemini-debug.log"
    started = time.monotonic()
    run_gemini(stack, model, "Walk the project", GEMINI_DEBUG_LOG_FILE=str(log))
    return Session(time.monotonic() - started, hook_times(log))


RUNNER = AgentRunner(
    agent="gemini",
    setups=(NO_HOOKS, COMMAND),
    tool_hook="AfterTool",
    hook_source={NO_HOOKS: "-", COMMAND: "debug log"},
    model=_model,
    session=session,
)
