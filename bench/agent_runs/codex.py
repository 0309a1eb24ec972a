"""Codex CLI: `codex exec` against tests/support/agent_models/responses.py, the hooks of
docs/agents/codex.md (command hooks only; `--dangerously-bypass-hook-trust` in every set-up).

Codex has no file-read tool: its model reads with a shell command, so a session's reads are
`cat README.md` through `exec_command`. Codex logs no hook durations (`RUST_LOG=trace` has
"hook/started" and "hook/completed" lines with no event name, in ~0.5 MB of other trace for
two calls), so each hook command is a bash wrapper that times the `memq hook codex` process
it runs with bash's own clock ($EPOCHREALTIME, no extra process): memq's time, not what
Codex adds to spawn it.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.agent_runs import COMMAND, NO_HOOKS, READ_FILE, AgentRunner, Session
from bench.agent_runs import shell_command as shell
from tests.support.agent_models.responses import FakeResponses, FunctionCall, Message, Step
from tests.support.agent_stack import AgentStack
from tests.support.codex_agent import codex_exec, write_codex_config

_WRAPPER = """#!/bin/bash
started=$EPOCHREALTIME
{memq} hook codex
status=$?
echo "$1 $started $EPOCHREALTIME" >> {log}
exit $status
"""


def script(calls: int) -> list[Step]:
    """`calls` tool calls, a shell command and a read (`cat`) in turn, then the answer."""
    commands = [f"cat {READ_FILE}" if i % 2 else shell(i) for i in range(calls)]
    steps: list[Step] = [FunctionCall(name="exec_command", arguments={"cmd": c}) for c in commands]
    return [*steps, Message(text="Done.")]


@contextmanager
def _model() -> Iterator[FakeResponses]:
    model = FakeResponses()
    try:
        yield model
    finally:
        model.close()


def wrap_hooks(codex_home: Path, memq: str, log: Path) -> None:
    """Make each documented `memq hook codex` handler the timing wrapper (named by event)."""
    wrapper = codex_home / "timed-hook.sh"
    wrapper.write_text(_WRAPPER.format(memq=shlex.quote(memq), log=shlex.quote(str(log))))
    wrapper.chmod(0o755)
    hooks_file = codex_home / "hooks.json"
    hooks = json.loads(hooks_file.read_text())
    for event, groups in hooks["hooks"].items():
        for group in groups:
            for handler in group["hooks"]:
                assert handler["command"] == f"{memq} hook codex", handler
                handler["command"] = f"{shlex.quote(str(wrapper))} {event}"
    hooks_file.write_text(json.dumps(hooks, indent=2))


def hook_times(log: Path) -> dict[str, list[float]]:
    """Each hook event's memq process durations (ms) the wrapper wrote."""
    times: dict[str, list[float]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        event, started, ended = line.split()
        times.setdefault(event, []).append((float(ended) - float(started)) * 1000)
    return times


def session(
    stack: AgentStack, model: FakeResponses, setup: str, calls: int, scratch: Path
) -> Session:
    # memq's MCP server is configured in both set-ups; only the hooks differ.
    codex_home = write_codex_config(stack, model.base_url)
    log = scratch / "codex-hooks.log"
    if setup == NO_HOOKS:
        (codex_home / "hooks.json").unlink()
    else:
        wrap_hooks(codex_home, stack.memq, log)
    model.script(*script(calls))
    started = time.monotonic()
    codex_exec(stack, codex_home, "Walk the project")
    return Session(time.monotonic() - started, hook_times(log))


RUNNER = AgentRunner(
    agent="codex",
    setups=(NO_HOOKS, COMMAND),
    tool_hook="PostToolUse",
    hook_source={NO_HOOKS: "-", COMMAND: "not logged; memq process timed by a wrapper"},
    model=_model,
    session=session,
)
