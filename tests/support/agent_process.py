"""`memq agent` as a real process for the hostile-input tests: start, post, read its state."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.ingest import console_script, subprocess_env
from tests.support.ports import free_port

DATA = Path(__file__).resolve().parents[1] / "data" / "claude_code"
SESSION = "9f2c1e7a-4b3d-4e8f-a1c2-5d6e7f809a1b"  # the fixtures' session_id
PREFIX = "t"


def tool_payload(tool_use_id: str, tool_name: str = "Bash", **tool_input: Any) -> bytes:
    """A PostToolUse hook input (the fixture's Bash call unless told otherwise)."""
    payload = json.loads((DATA / "post_tool_use.json").read_text())
    payload["tool_use_id"] = tool_use_id
    if tool_name != "Bash":
        path = tool_input.get("file_path", "")
        payload.update(
            tool_name=tool_name,
            tool_input=tool_input,
            tool_response={"type": "text", "file": {"filePath": path, "content": ""}},
        )
    return json.dumps(payload).encode()


@dataclass
class AgentProcess:
    """A running `memq agent`: its process, base URL and log."""

    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def post(self, body: bytes, timeout_s: float = 5.0) -> httpx.Response:
        """POST a hook input on a fresh connection."""
        return httpx.post(f"{self.url}/hooks/claude-code", content=body, timeout=timeout_s)

    def healthz(self) -> httpx.Response:
        """GET /healthz."""
        return httpx.get(f"{self.url}/healthz", timeout=5)

    def log(self) -> str:
        """What the process has logged so far."""
        return self.log_path.read_text(errors="replace")

    def cpu_s(self) -> float:
        """CPU seconds the process has used (user + system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100  # clock ticks; 100 on Linux

    def open_fds(self) -> int:
        """File descriptors the process holds now."""
        return len(list(Path(f"/proc/{self.proc.pid}/fd").iterdir()))

    def stop(self) -> tuple[int, float]:
        """SIGTERM; the exit code and how long it took to exit."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        return code, time.monotonic() - started


@contextmanager
def agent_process(
    data_dir: Path, redis_url: str, *, max_open_files: int | None = None, **memq: str
) -> Iterator[AgentProcess]:
    """`memq agent` on a free port with MEMQ_<name>=value for each of `memq`; killed on exit."""
    port = free_port()
    env = subprocess_env(
        data_dir,
        redis_url,
        MEMQ_PREFIX=PREFIX,
        MEMQ_AGENT_PORT=str(port),
        **{f"MEMQ_{k.upper()}": v for k, v in memq.items()},
    )
    log_path = data_dir / f"agent-{port}.log"
    limit: Callable[[], None] | None = None
    if max_open_files is not None:
        n = max_open_files

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [console_script(), "agent"], env=env, cwd=data_dir, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit,
        )  # fmt: skip
    agent = AgentProcess(proc, f"http://127.0.0.1:{port}", log_path)
    try:
        _wait_until_serving(agent)
        yield agent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _wait_until_serving(agent: AgentProcess, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if agent.proc.poll() is not None:
            raise AssertionError(f"memq agent exited with {agent.proc.returncode}: {agent.log()}")
        try:
            if agent.healthz().status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"memq agent did not answer within {timeout_s}s: {agent.log()}")
