"""What memq costs the agent: one scripted session of each real agent with no hooks, with
command hooks and with HTTP hooks (where the agent has them), and the per-hook times the
agent itself logged.

    python -m bench.agents [--runs 3] [--calls 12] [--agents claude-code,codex,gemini,opencode]

Each agent is the real binary scripts/agents.sh installs, run offline against its scripted
fake model (tests/support/agent_models/) and a real memq (redis-server, a `memq worker`, the
instant fake observer), configured from its docs/agents/ page. A session is `--calls` tool
calls, a shell command and a read of README.md in turn, then the answer; memq's MCP server
is configured in every set-up, so only the hooks differ. Every session gets a fresh HOME
and store; after a hooked session (off the clock) memq must have stored an observation.
The runners (one module per agent) are in bench/agent_runs/; the hook column is the
agent's per-tool-call hook, timed as its hook-times column says.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench.agent_runs import NO_HOOKS, AgentRunner, claude_code, codex, gemini, opencode
from bench.common import CpuMeter, machine, markdown_table, percentile, private_redis, progress
from tests.support.agent_bins import agent_version
from tests.support.agent_stack import agent_stack
from tests.support.fake_observer import FakeObserver

RUNNERS: dict[str, AgentRunner] = {
    r.agent: r for r in (claude_code.RUNNER, codex.RUNNER, gemini.RUNNER, opencode.RUNNER)
}
HEADERS = [
    "agent", "hooks", "session wall s (median)", "min", "max", "per-call hook", "hook ms p50",
    "hook ms p95", "hook times from",
]  # fmt: skip


def bench_agent(
    runner: AgentRunner, root: Path, redis_url: str, observer: FakeObserver, runs: int, calls: int
) -> list[list[object]]:
    """The agent's rows: its set-ups interleaved run by run, so load drifts hit them alike."""
    walls: dict[str, list[float]] = {setup: [] for setup in runner.setups}
    hook_ms: dict[str, list[float]] = {setup: [] for setup in runner.setups}
    with runner.model() as model:
        for run in range(runs):
            for setup in runner.setups:
                where = root / runner.agent / f"{setup.replace(' ', '-')}-{run}"
                with agent_stack(where, redis_url, observer) as stack:
                    done = runner.session(stack, model, setup, calls, where)
                    if setup != NO_HOOKS:  # the hooks really delivered (after the clock stopped)
                        stack.wait_for(observations=1, timeout_s=60)
                walls[setup].append(done.wall_s)
                hook_ms[setup] += done.hook_ms.get(runner.tool_hook, [])
                progress(f"{runner.agent}, {setup}, run {run + 1}: {done.wall_s:.2f} s")
    rows: list[list[object]] = []
    for setup in runner.setups:
        ms = hook_ms[setup]
        p50, p95 = (percentile(ms, 50), percentile(ms, 95)) if ms else ("-", "-")
        w = walls[setup]
        rows.append([runner.agent, setup, percentile(w, 50), min(w), max(w), runner.tool_hook,
                     p50, p95, runner.hook_source[setup]])  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--agents", default=",".join(RUNNERS), help="comma-separated")
    parser.add_argument(
        "--workdir", type=Path, help="keep the sessions' HOMEs and logs here (default: a temp dir)"
    )
    args = parser.parse_args()
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = sorted(set(agents) - set(RUNNERS))
    if unknown:
        parser.error(f"unknown agents {unknown}; known: {','.join(RUNNERS)}")
    meter = CpuMeter()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="memq-bench-agents-") as tmp:
        root = args.workdir.resolve() if args.workdir else Path(tmp)
        with private_redis(root / "redis") as redis:
            observer = FakeObserver()
            try:
                for agent in agents:
                    rows += bench_agent(
                        RUNNERS[agent], root, redis.url, observer, args.runs, args.calls
                    )
            finally:
                observer.close()
    print(f"{args.calls} tool calls a session, {args.runs} runs; {machine()}")
    print(f"Agents: {', '.join(agent_version(a) for a in agents)}")
    print(f"Load: {meter.report()}\n")
    print(markdown_table(HEADERS, rows))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
