"""What memq costs OpenCode: one scripted session with no plugin, the plugin posting to
`memq agent`, and the plugin falling back to `memq hook opencode`; and what one event costs
each way.

    python -m bench.opencode [--runs 3] [--calls 12] [--events 200]

OpenCode (the real binary scripts/agents.sh installs) runs offline against the scripted
model of tests/support/agent_models/chat_completions.py and a real memq (redis-server, a
worker, the instant fake observer), configured as docs/agents/opencode.md says. The plugin
sends in the background, so a session waits only for the context (its first model request)
and, at shutdown, for the last events; the per-event rows time a POST to the endpoint and a
`memq hook opencode` process, as the plugin makes them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import machine, markdown_table, percentile, private_redis, progress
from tests.support.agent_bins import agent_version
from tests.support.agent_models.chat_completions import Step, chat_completions_model, say, tool
from tests.support.agent_stack import AgentStack, agent_stack
from tests.support.fake_observer import FakeObserver
from tests.support.opencode_run import configure_opencode, run_opencode
from tests.support.ports import free_port

SETUPS = ("no plugin", "plugin -> memq agent", "plugin -> memq hook (agent down)")


def script(project: Path, calls: int) -> list[Step]:
    """A session of `calls` tool calls, reads and shell commands in turn."""
    steps = [
        tool("read", filePath=str(project / "README.md"))
        if i % 2
        else tool("bash", command=f"echo step {i}", description="Echo")
        for i in range(calls)
    ]
    return [*steps, say("Done.")]


def event_times(stack: AgentStack, url: str, events: int) -> dict[str, list[float]]:
    """Milliseconds per tool-call event: POSTed to `memq agent`, and piped to `memq hook`."""

    def payload(i: int) -> bytes:
        project = str(stack.project)
        return json.dumps(
            {"hook": "tool_call", "session_id": "ses_bench", "directory": project,
             "tool": "bash", "call_id": f"c{i}", "input": {"command": "ls"}, "output": "a\n"}
        ).encode()  # fmt: skip

    times: dict[str, list[float]] = {"POST /hooks/opencode": [], "memq hook opencode": []}
    with httpx.Client() as client:
        for i in range(events):
            started = time.perf_counter()
            client.post(url + "/hooks/opencode", content=payload(i)).raise_for_status()
            times["POST /hooks/opencode"].append((time.perf_counter() - started) * 1000)
    for i in range(max(5, events // 10)):
        started = time.perf_counter()
        subprocess.run(
            [stack.memq, "hook", "opencode"], input=payload(events + i), env=stack.env(),
            cwd=stack.project, capture_output=True, check=True, timeout=30,
        )  # fmt: skip
        times["memq hook opencode"].append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="memq-bench-opencode-") as tmp:
        root = Path(tmp)
        with private_redis(root / "redis") as redis, chat_completions_model() as model:
            observer = FakeObserver()
            try:
                with agent_stack(root / "stack", redis.url, observer) as stack:
                    config = configure_opencode(stack, model.base_url)
                    plugin = config / "plugin" / "memq.js"
                    source = plugin.read_text()
                    endpoint = stack.start_agent_endpoint()
                    down = f"http://127.0.0.1:{free_port()}"
                    walls: dict[str, list[float]] = {setup: [] for setup in SETUPS}
                    for run in range(args.runs):
                        for n, setup in enumerate(SETUPS):
                            marker = f"BENCH-{run}-{n}"
                            model.script(marker, *script(stack.project, args.calls))
                            if setup == "no plugin":
                                plugin.unlink()
                            else:
                                plugin.write_text(source)
                            url = endpoint if setup == SETUPS[1] else down
                            started = time.monotonic()
                            done = run_opencode(stack, f"{marker}: walk the project", url)
                            walls[setup].append(time.monotonic() - started)
                            if done.returncode != 0:
                                raise SystemExit(f"opencode exited {done.returncode}")
                            progress(f"opencode, {setup}, run {run + 1}: {walls[setup][-1]:.2f} s")
                    for setup, values in walls.items():
                        rows.append([setup, percentile(values, 50), min(values), max(values)])
                    per_event = event_times(stack, endpoint, args.events)
            finally:
                observer.close()
    print(f"{agent_version('opencode')}; {args.calls} tool calls a session, {args.runs} runs;"
          f" {machine()}\n")  # fmt: skip
    print(markdown_table(["setup", "session wall s (median)", "min", "max"], rows))
    print()
    print(markdown_table(
        ["one tool-call event", "n", "ms p50", "ms p95", "ms max"],
        [[name, len(ms), percentile(ms, 50), percentile(ms, 95), max(ms)]
         for name, ms in per_event.items()],
    ))  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
