"""Helpers for the ingest tests: subprocess environments, a silent TCP server, Redis scans."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parent.parent.parent
# Installed memq has its bytecode compiled; give subprocesses a cache outside the repo so
# their timings match that even where PYTHONDONTWRITEBYTECODE is set.
_PYCACHE = Path(tempfile.gettempdir()) / "memq-test-pycache"


def console_script() -> str:
    """The installed `memq` console script next to this Python."""
    exe = shutil.which("memq", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("the memq console script is not installed next to this Python")
    return exe


def subprocess_env(data_dir: Path, redis_url: str | None = None, **extra: str) -> dict[str, str]:
    """An explicit environment: never the developer's data dir or Redis."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(data_dir),
        "MEMQ_DATA_DIR": str(data_dir),
        "PYTHONPYCACHEPREFIX": str(_PYCACHE),
        "LANG": "C.UTF-8",
    }
    if "PYTHONPATH" in os.environ:
        # A worktree run (PYTHONPATH=$PWD) tests that tree's console scripts, not the install's.
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if redis_url is not None:
        env["MEMQ_REDIS_URL"] = redis_url
    # A worktree run (PYTHONPATH=$PWD) has its subprocesses import that tree, not the install.
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(extra)
    return env


def closed_port_url() -> str:
    """A Redis URL on a loopback port nothing listens on (connections are refused)."""
    return f"redis://127.0.0.1:{free_port()}/0"


@contextmanager
def black_hole() -> Iterator[str]:
    """A Redis URL whose server accepts connections and never answers."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # kept open, never read from, never written to

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()


async def stored_bytes(redis: aioredis.Redis) -> bytes:
    """Every key name and every value byte in the database, read back by type and DUMP."""
    chunks: list[bytes] = []
    async for key in redis.scan_iter(count=1000):
        chunks.append(key)
        kind = (await redis.type(key)).decode()
        if kind == "string":
            chunks.append(await redis.get(key) or b"")  # b"": deleted since TYPE (a lease)
        elif kind == "stream":
            for entry_id, fields in await redis.xrange(key):
                chunks.append(entry_id)
                for name, value in fields.items():
                    chunks += [name, value]
        elif kind == "hash":
            for name, value in (await redis.hgetall(key)).items():
                chunks += [name, value]
        elif kind == "set":
            chunks.extend(await redis.smembers(key))
        elif kind == "zset":
            chunks.extend(await redis.zrange(key, 0, -1))
        elif kind == "list":
            chunks.extend(await redis.lrange(key, 0, -1))
        elif kind == "none":
            continue  # deleted since the scan saw it (a running worker's queue, a lease)
        else:
            pytest.fail(f"unexpected key type {kind} for {key!r}")
        chunks.append(await redis.dump(key) or b"")
    return b"\n".join(chunks)


@contextmanager
def short_data_dir() -> Iterator[Path]:
    """A data dir short enough for a unix socket path (< 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="mq", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
