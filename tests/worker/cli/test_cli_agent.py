"""`memq agent` and `memq up` as processes: the HTTP hook endpoint starts, serves and stops."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import decode_event
from tests.support.fake_observer import FakeObserver
from tests.support.ingest import console_script, subprocess_env
from tests.support.ports import free_port
from tests.support.worker_process import worker_env
from worker.keys import Keys

pytestmark = pytest.mark.slow  # runs memq processes

PAYLOAD = Path(__file__).resolve().parents[2] / "data" / "claude_code" / "post_tool_use.json"
SESSION = "9f2c1e7a-4b3d-4e8f-a1c2-5d6e7f809a1b"


@contextmanager
def _process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen([console_script(), *args], env=env, stdout=out, stderr=out)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _post(port: int, body: bytes, timeout_s: float = 20.0) -> tuple[int, bytes]:
    """POST a hook input once the endpoint answers (it may still be starting)."""
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{port}/hooks/claude-code"
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=5) as r:
                return r.status, r.read()
        except urllib.error.URLError as e:
            if isinstance(e, urllib.error.HTTPError) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


async def test_memq_agent_publishes_and_stops_cleanly_on_sigterm(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    port = free_port()
    env = subprocess_env(tmp_path, redis_url, MEMQ_PREFIX="t", MEMQ_AGENT_PORT=str(port))
    with _process(["agent"], env, tmp_path / "agent.log") as proc:
        assert _post(port, PAYLOAD.read_bytes()) == (200, b"")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    entries = await redis.xrange(Keys("t").events(SESSION))
    assert [decode_event(f[b"event"]).tool_name for _, f in entries] == ["Bash"]  # type: ignore[union-attr]
    assert f"127.0.0.1:{port}/hooks/claude-code" in (tmp_path / "agent.log").read_text()


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["--host", "0.0.0.0"], 2, "without a MEMQ_AGENT_TOKEN of at least 16 characters"),
        (["--port", "BUSY"], 1, "cannot listen on 127.0.0.1:"),
    ],
    ids=["beyond-loopback-without-token", "port-taken"],
)
def test_memq_agent_refuses_to_start_with_one_line(
    tmp_path: Path, args: list[str], code: int, fragment: str
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        args = [str(busy.getsockname()[1]) if a == "BUSY" else a for a in args]
        done = subprocess.run(
            [console_script(), "agent", *args],
            env=subprocess_env(tmp_path, "redis://127.0.0.1:1/0"),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert done.returncode == code
    assert fragment in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_memq_up_takes_http_hooks_beside_the_worker(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver
) -> None:
    port = free_port()
    env = worker_env(
        tmp_path, redis_url, fake_observer, AGENT_PORT=str(port), UI_PORT=str(free_port())
    )
    payload = json.loads(PAYLOAD.read_text())
    payload["tool_input"]["command"] = "pytest tests/test_up_marker.py"
    with _process(["up"], env, tmp_path / "up.log") as proc:
        assert _post(port, json.dumps(payload).encode()) == (200, b"")
        (request,) = fake_observer.wait_for_requests(1, timeout_s=20)
        assert "test_up_marker.py" in request.user
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
