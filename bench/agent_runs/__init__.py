"""One runner per agent for `python -m bench.agents`: how each real agent is configured, run
for one scripted session and read for the hook times it logged.

Each runner module holds a RUNNER: its set-ups (no hooks, command hooks, HTTP hooks where
the agent has them), the scripted model it runs against, and `session()`, which configures a
fresh AgentStack for one set-up, runs one session of `calls` tool calls (reads and shell
commands in turn, the same work for every agent) and returns its wall seconds and the
per-hook milliseconds the agent logged (or, where it logs none, that a wrapper measured).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.agent_stack import AgentStack

NO_HOOKS, COMMAND, HTTP = "no hooks", "command hooks", "HTTP hooks"
RELAYED = "command hooks, memq agent up"
"""The command hooks while `memq agent` runs: each hook hands its payload to it (relay)."""
READ_FILE = "README.md"
"""What every session reads (the stack's project has it)."""


def shell_command(i: int) -> str:
    """The `i`th shell command of a session."""
    return f"echo step {i}"


HookTimes = dict[str, list[float]]
"""Hook event -> milliseconds, one value per run of that hook."""


@dataclass(frozen=True)
class Session:
    wall_s: float
    hook_ms: HookTimes


@dataclass(frozen=True)
class AgentRunner:
    agent: str
    """The name tests/support/agent_bins knows it by."""
    setups: tuple[str, ...]
    tool_hook: str
    """The hook the agent runs after every tool call (the one a session runs `calls` times)."""
    hook_source: dict[str, str]
    """Set-up -> where its hook times come from ("debug log", "not logged", …)."""
    model: Callable[[], AbstractContextManager[Any]]
    """A running scripted model server, closed on the way out."""
    session: Callable[[AgentStack, Any, str, int, Path], Session]
    """(stack, model, set-up, calls, a scratch dir) -> one timed session."""
