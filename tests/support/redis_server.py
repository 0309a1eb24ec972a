"""A real redis-server on a free loopback port with its own temp dir (never the shared 6379)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.ports import free_port, wait_for_port


class RedisServer:
    """Starts, stops and restarts one private redis-server process."""

    def __init__(self, workdir: Path, *, appendonly: bool = False, port: int | None = None) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server missing: scripts/test installs Debian's redis-server")
        self.exe = exe
        self.workdir = workdir
        self.appendonly = appendonly
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            self.exe,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.workdir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always",
            "--logfile", str(self.workdir / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)
        return self

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
