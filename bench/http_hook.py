"""The HTTP hook under load: `memq agent` in its own process, hook requests at a fixed rate.

Each request is one Claude Code PostToolUse input POSTed on a new loopback connection (the
conservative case: no keep-alive); its time runs from the first byte sent to the last byte
of the answer. Requests start on schedule whatever earlier ones do (an open loop). The same
load on `GET /healthz`, which does nothing, shows what the machine itself adds.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import process_cpu_s
from tests.support.ports import free_port
from worker.ingest.agent import HOOK_PATH


@contextmanager
def running_agent(redis_url: str, data_dir: Path) -> Iterator[tuple[int, int]]:
    """`memq agent` on a free loopback port, as a separate process; yields port and pid."""
    port = free_port()
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(data_dir),
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_REDIS_URL": redis_url,
        "MEMQ_PREFIX": "bench",
        "MEMQ_AGENT_PORT": str(port),
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]  # a worktree's code, not the installed one
    memq = str(Path(sys.executable).parent / "memq")
    proc = subprocess.Popen([memq, "agent"], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("memq agent did not start") from None
                time.sleep(0.05)
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(20)


class HttpTimes(NamedTuple):
    """Request times (seconds) of the hook and of the do-nothing baseline, and agent CPU."""

    hook: list[float]
    baseline: list[float]
    cpu_ms_per_request: float


async def _request(port: int, path: str, body: bytes | None) -> float:
    head = f"POST {path}" if body is not None else f"GET {path}"
    request = (
        f"{head} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body or b'')}\r\nConnection: close\r\n\r\n"
    ).encode() + (body or b"")
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    answer = await reader.read()  # the server closes: Connection: close
    elapsed = time.perf_counter() - started
    writer.close()
    if not answer.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"request to {path} failed: {answer[:200]!r}")
    return elapsed


async def _load(port: int, rate: float, path: str, bodies: Sequence[bytes | None]) -> list[float]:
    loop = asyncio.get_running_loop()
    began = loop.time()
    tasks = []
    for i, body in enumerate(bodies):
        delay = began + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_request(port, path, body)))
    return list(await asyncio.gather(*tasks))


def http_hook_times(
    redis_url: str, data_dir: Path, *, rate: float, seconds: float, payload: Callable[[int], str]
) -> HttpTimes:
    """Each HTTP hook request's time at `rate` requests a second for `seconds`, and more."""
    count = int(rate * seconds)
    with running_agent(redis_url, data_dir) as (port, pid):
        warm = [payload(-1 - i).encode() for i in range(20)]  # imports, connections, caches
        asyncio.run(_load(port, 50, HOOK_PATH, warm))
        baseline = asyncio.run(_load(port, rate, "/healthz", [None] * count))
        bodies = [payload(i).encode() for i in range(count)]
        cpu_before = process_cpu_s(pid)
        hook = asyncio.run(_load(port, rate, HOOK_PATH, bodies))
        cpu_ms = (process_cpu_s(pid) - cpu_before) / count * 1000
    return HttpTimes(hook, baseline, cpu_ms)
