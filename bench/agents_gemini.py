"""What memq costs Gemini CLI: one scripted session with and without memq's hooks, and the
per-hook times the CLI itself logged.

    python -m bench.agents_gemini [--runs 3] [--calls 12]

Gemini CLI (the real binary scripts/agents.sh installs) runs offline against the scripted
model of tests/support/agent_models/gemini.py and a real memq (redis-server, a worker, the
instant fake observer), configured from docs/agents/gemini.md's blocks (memq's MCP server in
both setups). GEMINI_DEBUG_LOG_FILE logs each hook event's duration ("Hook execution for
AfterTool: 1 hooks executed successfully, total duration: 74ms").
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from bench.common import machine, markdown_table, percentile, private_redis, progress
from tests.support.agent_bins import agent_version
from tests.support.agent_models.gemini import FakeGemini, Step, answer, call
from tests.support.agent_stack import agent_stack
from tests.support.fake_observer import FakeObserver
from tests.support.gemini_agent import configure_gemini, run_gemini

_HOOK_LINE = re.compile(r"Hook execution for (\w+): .*total duration: (\d+)ms")


def script(calls: int) -> list[Step]:
    """A session of `calls` tool calls, reads and shell commands in turn."""
    steps = [
        call("read_file", file_path="README.md")
        if i % 2
        else call("run_shell_command", command=f"echo step {i}", description="Echo")
        for i in range(calls)
    ]
    return [*steps, answer("Done.")]


def hook_times(log: Path) -> dict[str, list[float]]:
    """Each hook event's durations (ms) as the CLI's debug log states them."""
    times: dict[str, list[float]] = {}
    for m in _HOOK_LINE.finditer(log.read_text(errors="replace") if log.exists() else ""):
        times.setdefault(m[1], []).append(float(m[2]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=12)
    args = parser.parse_args()
    rows: list[list[object]] = []
    hook_rows: list[list[object]] = []
    with TemporaryDirectory(prefix="memq-bench-gemini-") as tmp:
        root = Path(tmp)
        with private_redis(root / "redis") as redis:
            observer, model = FakeObserver(), FakeGemini()
            try:
                for setup in ("no hooks", "command hooks"):
                    walls: list[float] = []
                    times: dict[str, list[float]] = {}
                    for run in range(args.runs):
                        with agent_stack(root / f"{setup[:2]}-{run}", redis.url, observer) as st:
                            configure_gemini(st, hooks=setup == "command hooks")
                            model.script(script(args.calls))
                            log = root / f"debug-{setup[:2]}-{run}.log"
                            started = time.monotonic()
                            run_gemini(
                                st, model, "Walk the project", GEMINI_DEBUG_LOG_FILE=str(log)
                            )
                            walls.append(time.monotonic() - started)
                            for event, ms in hook_times(log).items():
                                times.setdefault(event, []).extend(ms)
                        progress(f"gemini, {setup}, run {run + 1}: {walls[-1]:.2f} s")
                    after = times.get("AfterTool", [])
                    p50, p95 = (
                        (percentile(after, 50), percentile(after, 95)) if after else ("-", "-")
                    )
                    rows.append(["gemini", setup, percentile(walls, 50), min(walls), max(walls),
                                 p50, p95])  # fmt: skip
                    hook_rows += [
                        [event, len(ms), percentile(ms, 50), percentile(ms, 95), max(ms)]
                        for event, ms in sorted(times.items())
                    ]
            finally:
                observer.close()
                model.close()
    print(f"{agent_version('gemini')}; {args.calls} tool calls a session, {args.runs} runs;"
          f" {machine()}\n")  # fmt: skip
    print(markdown_table(
        ["agent", "hooks", "session wall s (median)", "min", "max", "AfterTool ms p50",
         "AfterTool ms p95"], rows))  # fmt: skip
    print("\nEach hook event as the CLI logged it:\n")
    print(markdown_table(["event", "runs", "ms p50", "ms p95", "ms max"], hook_rows))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
