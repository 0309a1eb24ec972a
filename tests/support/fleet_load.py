"""Live-pace load for a fleet: Claude Code PostToolUse payloads through the real command hook.

Each session is one task that runs `memq hook claude-code` once per tool call, one after the
other (as Claude Code runs a session's hooks), on a fixed schedule: the sessions together
publish `rate` events a second for `seconds`. A call is published once its hook exited 0;
with `memq agent` up on the host the hook relays to it, otherwise it publishes (or spools)
itself. The event id is the one memq's Claude Code reader derives from the tool use id, so
the accounting can find every call again.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from pathlib import Path
from typing import Any

import msgspec

from tests.support.ingest import console_script
from worker.ingest.agents.claude_code import tool_event_id

_TEMPLATE = Path(__file__).resolve().parents[1] / "data/claude_code/2.1.328/PostToolUse-Bash.json"
HOOK_TIMEOUT_S = 30.0  # far past the hook's own 1 s budget: a hung hook is a finding


class Published(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call whose hook exited 0: memq has it (published, relayed or spooled)."""

    event_id: str
    session: str
    step: int
    host: int
    published_at: float  # wall clock (time.time()) when the hook exited
    hook_s: float  # how long the hook process ran


class HookFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A hook that did not exit 0 in time: the call is not counted as published."""

    session: str
    step: int
    host: int
    returncode: int | None
    stderr: str


class LoadResult(msgspec.Struct, kw_only=True):
    """What a load run handed to memq, in publish order per session."""

    published: list[Published] = msgspec.field(default_factory=list)
    failures: list[HookFailure] = msgspec.field(default_factory=list)
    started_at: float = 0.0
    ended_at: float = 0.0


async def next_publish(load: LoadResult, host: int, timeout_s: float = 30.0) -> None:
    """Return as soon as one more of `host`'s hooks has exited 0 in a running load."""
    seen = sum(p.host == host for p in load.published)
    deadline = time.monotonic() + timeout_s
    while sum(p.host == host for p in load.published) == seen:
        if time.monotonic() > deadline:
            raise TimeoutError(f"host {host} published nothing in {timeout_s}s")
        await asyncio.sleep(0.005)  # a hook takes tens of ms: this polls well inside one


def step_command(session: str, step: int) -> str:
    """The Bash command of a session's step: the step leads, so the observation's title has it."""
    return f"echo step-{step:04d} {session}"


def bash_payload(session: str, step: int) -> tuple[str, bytes]:
    """(event id, hook input) of one Bash PostToolUse as Claude Code 2.1.328 sends it."""
    payload: dict[str, Any] = copy.deepcopy(_BASE)
    tool_use_id = f"toolu_{session}_{step:04d}"
    payload["session_id"] = session
    payload["tool_use_id"] = tool_use_id
    payload["tool_input"] = {"command": step_command(session, step)}
    payload["tool_response"]["stdout"] = f"step-{step:04d}"
    return tool_event_id(session, tool_use_id), json.dumps(payload).encode()


_BASE: dict[str, Any] = json.loads(_TEMPLATE.read_text())


async def run_hook(env: dict[str, str], body: bytes) -> tuple[int | None, str]:
    """Run `memq hook claude-code` with `body` on stdin: (exit code or None if hung, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        console_script(), "hook", "claude-code",
        env=env, cwd=env["MEMQ_DATA_DIR"],
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        _, err = await asyncio.wait_for(proc.communicate(body), HOOK_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None, "hook did not exit within 30 s"
    return proc.returncode, err.decode(errors="replace")


async def run_load(
    host_envs: list[dict[str, str]],
    *,
    seconds: float,
    rate: float,
    sessions_per_host: int,
    run: str,
    into: LoadResult | None = None,
) -> LoadResult:
    """Publish about `rate` * `seconds` tool calls through each host's command hook.

    Session ids are `<run>-h<host>-s<k>`, so several runs on one fleet never share one.
    `into` is filled as calls are published, for a fault that waits on the load's progress.
    """
    sessions = [
        (h, f"{run}-h{h}-s{k}") for k in range(sessions_per_host) for h in range(len(host_envs))
    ]
    interval = len(sessions) / rate  # each session's pace
    steps = max(1, round(seconds / interval))
    result = into if into is not None else LoadResult()
    result.started_at = time.time()
    start = time.monotonic()

    async def session_task(index: int, host: int, session: str) -> None:
        offset = index / rate  # staggered, so the fleet sees a steady stream
        for step in range(steps):
            due = start + offset + step * interval
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            event_id, body = bash_payload(session, step)
            began = time.monotonic()
            code, err = await run_hook(host_envs[host], body)
            if code == 0:
                result.published.append(
                    Published(
                        event_id=event_id, session=session, step=step, host=host,
                        published_at=time.time(), hook_s=time.monotonic() - began,
                    )
                )  # fmt: skip
            else:
                result.failures.append(
                    HookFailure(session=session, step=step, host=host, returncode=code, stderr=err)
                )

    await asyncio.gather(*(session_task(i, h, s) for i, (h, s) in enumerate(sessions)))
    result.ended_at = time.time()
    return result
