"""What memq costs the agent: one scripted session of a real agent with no hooks, command hooks
and HTTP hooks, and the per-hook times the agent itself logged.

    python -m bench.agents [--runs 3] [--calls 12]

Claude Code (the real binary scripts/agents.sh installs) runs offline against the scripted
model of tests/support/agent_models/anthropic.py and a real memq (redis-server, a worker,
the instant fake observer); the hooks are docs/agents/claude-code.md's blocks. Its
`--debug-file` logs each hook run with its duration ("finished with status 0 (74ms)").
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine, markdown_table, percentile, private_redis, progress
from tests.agents.test_claude_code import TOOLS, configure, doc_blocks
from tests.support.agent_bins import agent_binary, agent_version
from tests.support.agent_models.anthropic import AnthropicAgentModel, Step, Text, ToolUse
from tests.support.agent_stack import AgentStack, agent_stack
from tests.support.fake_observer import FakeObserver

_HOOK_LINE = re.compile(r"Hooks: (\w+)(?::\S+)? \[[^\]]*\] finished with status \d+ \((\d+)ms\)")
_HTTP_LINE = re.compile(r"HTTP hook .*?(\w+).*? (?:succeeded|completed|finished).*?\((\d+)ms\)")


def script(calls: int) -> list[Step]:
    """A session of `calls` tool calls, reads and shell commands in turn."""
    steps: list[Step] = []
    for i in range(calls):
        if i % 2:
            steps.append(ToolUse("Read", {"file_path": "README.md"}))
        else:
            steps.append(ToolUse("Bash", {"command": f"echo step {i}", "description": "Echo"}))
    return [*steps, Text("Done.")]


def claude_session(stack: AgentStack, model: AnthropicAgentModel, log: Path) -> float:
    """One `claude -p` session; its wall seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [str(agent_binary("claude-code")), "-p", "Walk the project", "--output-format", "json",
         "--permission-mode", "acceptEdits", "--allowedTools", TOOLS, "--debug-file", str(log)],
        cwd=stack.project, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env=stack.env(ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-fake-local-0000",
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1"),
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"claude exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return time.monotonic() - started


def hook_times(log: Path) -> dict[str, list[float]]:
    """Each hook event's durations (ms) as the agent's debug log states them."""
    times: dict[str, list[float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = _HOOK_LINE.search(line)
        if m:
            times.setdefault(m[1], []).append(float(m[2]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=12)
    args = parser.parse_args()
    rows: list[list[object]] = []
    per_hook: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="memq-bench-agents-") as tmp:
        root = Path(tmp)
        with private_redis(root / "redis") as redis:
            observer, model = FakeObserver(), AnthropicAgentModel()
            try:
                for setup in ("no hooks", "command hooks", "HTTP hooks"):
                    walls: list[float] = []
                    times: dict[str, list[float]] = {}
                    for run in range(args.runs):
                        with agent_stack(root / f"{setup[:4]}-{run}", redis.url, observer) as st:
                            hooks = {"no hooks": {}, "command hooks": doc_blocks()[0],
                                     "HTTP hooks": doc_blocks()[1]}[setup]  # fmt: skip
                            url = st.start_agent_endpoint() if setup == "HTTP hooks" else None
                            configure(st, hooks, agent_url=url)
                            model.script = script(args.calls)
                            log = root / f"debug-{setup[:4]}-{run}.log"
                            walls.append(claude_session(st, model, log))
                            for event, ms in hook_times(log).items():
                                times.setdefault(event, []).extend(ms)
                        progress(f"claude-code, {setup}, run {run + 1}: {walls[-1]:.2f} s")
                    per_hook[setup] = times
                    post = times.get("PostToolUse", [])
                    p50, p95 = (percentile(post, 50), percentile(post, 95)) if post else ("-", "-")
                    rows.append(
                        [
                            "claude-code",
                            setup,
                            percentile(walls, 50),
                            min(walls),
                            max(walls),
                            p50,
                            p95,
                        ]
                    )
            finally:
                observer.close()
                model.close()
    print(f"{agent_version('claude-code')}; {args.calls} tool calls a session, {args.runs} runs;"
          f" {machine()}\n")  # fmt: skip
    print(markdown_table(
        ["agent", "hooks", "session wall s (median)", "min", "max", "PostToolUse ms p50",
         "PostToolUse ms p95"], rows))  # fmt: skip
    print()
    hook_rows = [
        [setup, event, len(ms), percentile(ms, 50), percentile(ms, 95), max(ms)]
        for setup, times in per_hook.items() for event, ms in sorted(times.items())
    ]  # fmt: skip
    print("Each hook as the agent logged it (command hooks only: it logs no HTTP hook's time):\n")
    print(markdown_table(["hooks", "event", "runs", "ms p50", "ms p95", "ms max"], hook_rows))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
