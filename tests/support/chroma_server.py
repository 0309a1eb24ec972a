"""A real Chroma server (`chroma run` from the venv) on a free loopback port, with its own dir.

`kill()` is a `kill -9`; `start()` brings it back on the same port and path, so clients that
knew the URL find the same collections again.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port

START_TIMEOUT_S = 60.0


def chroma_binary() -> str:
    """The `chroma` CLI of the chromadb package installed next to this Python."""
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent))
    if exe is None:
        raise RuntimeError(
            "the chroma CLI is not installed next to this Python: install memq's pinned"
            " dependencies (chromadb provides `chroma run`)"
        )
    return exe


class ChromaServer:
    """One `chroma run` process; its log goes to `<workdir>/chroma.log`."""

    def __init__(self, workdir: Path | None = None) -> None:
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="memq-chroma-"))
        self._owns_workdir = workdir is None
        self.path = self.workdir / "data"
        self.port = free_port()
        self.log_path = self.workdir / "chroma.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        """What MEMQ_CHROMA is set to."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ChromaServer:
        """Start the server (again) and wait until its heartbeat answers."""
        if self.running:
            return self
        self.path.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    *(chroma_binary(), "run", "--path", str(self.path)),
                    *("--host", "127.0.0.1", "--port", str(self.port)),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                # Its own process group: a terminal's ^C reaches pytest, not the server.
                start_new_session=True,
            )
        self.starts += 1
        self.wait_ready(timeout_s)
        return self

    @property
    def running(self) -> bool:
        """True while the process lives."""
        return self.proc is not None and self.proc.poll() is None

    def heartbeat(self) -> bool:
        """True when the server answers its heartbeat."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1.0) as reply:
                return "nanosecond heartbeat" in json.loads(reply.read())
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Block until the heartbeat answers; fail with the log's tail if the server died."""
        deadline = time.monotonic() + timeout_s
        while not self.heartbeat():
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"chroma run exited early:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"chroma answers no heartbeat after {timeout_s}s:\n"
                                   f"{self.log_tail()}")  # fmt: skip
            time.sleep(0.1)

    def kill(self) -> None:
        """`kill -9` the server (what a crashed host looks like), and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """Kill the server and remove its directory (when this object made it)."""
        self.kill()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server's log, for failure messages."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]


@contextmanager
def chroma_server() -> Iterator[ChromaServer]:
    """A started Chroma server, stopped and removed on the way out."""
    server = ChromaServer()
    try:
        yield server.start()
    finally:
        server.stop()
