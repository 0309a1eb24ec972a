"""OpenCode: `opencode run` against tests/support/agent_models/chat_completions.py,
configured as docs/agents/opencode.md says. Its hooks are memq's plugin: "HTTP hooks" is the
plugin posting to `memq agent`, "command hooks" the plugin falling back to `memq hook
opencode` (MEMQ_AGENT_URL a closed port), "no hooks" no plugin (memq's MCP server stays
configured). The plugin sends in the background: a session waits only for the context (its
first model request) and, at shutdown, for the last events. OpenCode's log has no line for
a plugin hook (`--log-level DEBUG` adds none), so no hook times."""

from __future__ import annotations

import time
from pathlib import Path

from bench.agent_runs import COMMAND, HTTP, NO_HOOKS, READ_FILE, AgentRunner, Session
from bench.agent_runs import shell_command as shell
from tests.support.agent_models.chat_completions import (
    ChatCompletionsModel,
    Step,
    chat_completions_model,
    say,
    tool,
)
from tests.support.agent_stack import AgentStack
from tests.support.opencode_run import configure_opencode, run_opencode
from tests.support.ports import free_port


def script(project: Path, calls: int) -> list[Step]:
    """`calls` tool calls, a shell command and a read in turn, then the answer."""
    steps = [
        tool("read", filePath=str(project / READ_FILE))
        if i % 2
        else tool("bash", command=shell(i), description="Echo")
        for i in range(calls)
    ]
    return [*steps, say("Done.")]


def session(
    stack: AgentStack, model: ChatCompletionsModel, setup: str, calls: int, scratch: Path
) -> Session:
    config = configure_opencode(stack, model.base_url)
    if setup == NO_HOOKS:
        (config / "plugin" / "memq.js").unlink()
    url = stack.start_agent_endpoint() if setup == HTTP else f"http://127.0.0.1:{free_port()}"
    marker = f"BENCH-{scratch.name}"
    model.script(marker, *script(stack.project, calls))
    started = time.monotonic()
    done = run_opencode(stack, f"{marker}: walk the project", url)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"opencode exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return Session(wall, {})


RUNNER = AgentRunner(
    agent="opencode",
    setups=(NO_HOOKS, COMMAND, HTTP),
    tool_hook="tool_call",
    hook_source={NO_HOOKS: "-", COMMAND: "not logged", HTTP: "not logged"},
    model=chat_completions_model,
    session=session,
)
