"""Claude Code: `claude -p` against tests/support/agent_models/anthropic.py, the hooks of
docs/agents/claude-code.md (command and HTTP). Its `--debug-file` logs each command hook run
with its duration ("Hooks: PostToolUse:Bash [...] finished with status 0 (74ms)"). For an
HTTP hook it logs no duration and no event name, only the POST and the response, each with
its millisecond timestamp; a POST that follows a tool's "[Stall] tool_dispatch_end" line is
that call's PostToolUse, and the two timestamps give its round trip as the agent saw it."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from bench.agent_runs import COMMAND, HTTP, NO_HOOKS, READ_FILE, RELAYED, AgentRunner, Session
from bench.agent_runs import shell_command as shell
from tests.agents.test_claude_code import TOOLS, configure, doc_blocks
from tests.support.agent_bins import agent_binary
from tests.support.agent_models.anthropic import AnthropicAgentModel, Step, Text, ToolUse
from tests.support.agent_stack import AgentStack

_HOOK_LINE = re.compile(r"Hooks: (\w+)(?::\S+)? \[[^\]]*\] finished with status \d+ \((\d+)ms\)")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+Z) ")


def script(calls: int) -> list[Step]:
    """`calls` tool calls, a shell command and a read in turn, then the answer."""
    steps: list[Step] = [
        ToolUse("Read", {"file_path": READ_FILE})
        if i % 2
        else ToolUse("Bash", {"command": shell(i), "description": "Echo"})
        for i in range(calls)
    ]
    return [*steps, Text("Done.")]


@contextmanager
def _model() -> Iterator[AnthropicAgentModel]:
    model = AnthropicAgentModel()
    try:
        yield model
    finally:
        model.close()


def hook_times(log: Path) -> dict[str, list[float]]:
    """Each hook event's durations (ms) as the debug log states them; an HTTP PostToolUse's
    from its POST and response lines."""
    times: dict[str, list[float]] = {}
    after_tool = False
    posted: float | None = None  # when a PostToolUse's POST went out
    for line in (log.read_text(errors="replace") if log.exists() else "").splitlines():
        stamp = _STAMP.match(line)
        if m := _HOOK_LINE.search(line):
            times.setdefault(m[1], []).append(float(m[2]))
        elif "tool_dispatch_end" in line:
            after_tool = True
        elif stamp and "Hooks: HTTP hook POST to " in line:
            posted, after_tool = (_seconds(stamp[1]) if after_tool else None), False
        elif stamp and posted is not None and "Hooks: HTTP hook response status" in line:
            times.setdefault("PostToolUse", []).append(round((_seconds(stamp[1]) - posted) * 1000))
            posted = None
    return times


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def session(
    stack: AgentStack, model: AnthropicAgentModel, setup: str, calls: int, scratch: Path
) -> Session:
    blocks = doc_blocks()
    hooks = {NO_HOOKS: {}, COMMAND: blocks[0], HTTP: blocks[1], RELAYED: blocks[0]}[setup]
    url = stack.start_agent_endpoint() if setup in (HTTP, RELAYED) else None
    configure(stack, hooks, agent_url=url if setup == HTTP else None)
    # The command hooks find the running agent where MEMQ_AGENT_PORT says.
    relay = {"MEMQ_AGENT_PORT": url.rsplit(":", 1)[1]} if url and setup == RELAYED else {}
    model.script = script(calls)
    log = scratch / "claude-debug.log"
    started = time.monotonic()
    done = subprocess.run(
        [str(agent_binary("claude-code")), "-p", "Walk the project", "--output-format", "json",
         "--permission-mode", "acceptEdits", "--allowedTools", TOOLS, "--debug-file", str(log)],
        cwd=stack.project, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env=stack.env(ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-fake-local-0000",
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                      **relay),
    )  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"claude exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return Session(wall, hook_times(log))


RUNNER = AgentRunner(
    agent="claude-code",
    setups=(NO_HOOKS, COMMAND, RELAYED, HTTP),
    tool_hook="PostToolUse",
    hook_source={
        NO_HOOKS: "-",
        COMMAND: "debug log",
        RELAYED: "debug log",
        HTTP: "debug log (POST and response lines)",
    },
    model=_model,
    session=session,
)
