"""The embedded default Redis: one `redis-server` per data dir, on a unix socket, AOF on.

Every memq process of the machine shares it: the first one that needs Redis starts it
(daemonized, so it outlives that process) under a file lock, the others find its socket
answering PING. A pidfile or socket left behind by a dead server is cleaned before a start.
PING and SHUTDOWN go through redis-py's sync client; the hook, which cannot afford importing
redis-py, passes a `probe` of its own client instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from worker.errors import RedisUnavailableError

# AF_UNIX paths are limited to 108 bytes including the terminating NUL (sun_path).
_MAX_SOCKET_PATH_BYTES = 107
_POLL_S = 0.005
DEFAULT_START_TIMEOUT_S = 10.0
INSTALL_HINT = "install redis-server (e.g. `apt-get install redis-server`) or set MEMQ_REDIS_URL"

Probe = Callable[[Path, float], bool]
"""Whether a server answers PING with PONG on the socket at path, within timeout_s."""


class ManagedStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What `memq redis status` reports about the managed server."""

    running: bool
    pid: int | None
    socket: str
    directory: str


class ManagedRedis:
    """The redis-server memq manages in `<data_dir>/redis/`."""

    def __init__(
        self, data_dir: Path, *, executable: str | None = None, probe: Probe | None = None
    ) -> None:
        self.directory = data_dir / "redis"
        self.socket_path = self.directory / "redis.sock"
        self.pid_path = self.directory / "redis.pid"
        self.log_path = self.directory / "redis.log"
        self._lock_path = self.directory / "start.lock"
        self._executable = executable
        self._probe = probe or ping

    @property
    def url(self) -> str:
        """The redis-py URL of the managed server's socket."""
        return f"unix://{self.socket_path}"

    def answers(self, timeout_s: float = 0.2) -> bool:
        """Whether a server answers PING with PONG on the socket right now."""
        return self._probe(self.socket_path, timeout_s)

    def ensure_running(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Path:
        """Start the server unless it already answers; returns the socket path."""
        if self.answers():
            return self.socket_path
        deadline = time.monotonic() + timeout_s
        if len(os.fsencode(self.socket_path)) > _MAX_SOCKET_PATH_BYTES:
            raise RedisUnavailableError(
                f"the managed Redis socket path {self.socket_path} is longer than a unix socket "
                "allows: set MEMQ_DATA_DIR to a shorter directory or set MEMQ_REDIS_URL"
            )
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._start_lock(deadline):
            if self.answers():
                return self.socket_path  # another process started it while we waited
            pid = self._live_pid()
            if pid is None:
                self._remove_stale_files()
                self._spawn(deadline)
            self._wait_until_answering(deadline, pid)
        return self.socket_path

    def status(self) -> ManagedStatus:
        """Whether the managed server runs, with its pid and socket."""
        return ManagedStatus(
            running=self.answers(),
            pid=self._live_pid(),
            socket=str(self.socket_path),
            directory=str(self.directory),
        )

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Shut the managed server down (AOF flushed); False when it was not running."""
        pid = self._live_pid()
        was_running = self.answers()
        if was_running:
            _send_shutdown(self.socket_path)
        elif pid is not None:
            import signal

            os.kill(pid, signal.SIGTERM)
        if pid is not None and not _wait_for_exit(pid, time.monotonic() + timeout_s):
            raise RedisUnavailableError(
                f"managed redis-server (pid {pid}) did not stop within {timeout_s:g}s"
            )
        self._remove_stale_files()
        return was_running or pid is not None

    def _spawn(self, deadline: float) -> None:
        import shutil
        import subprocess

        exe = self._executable or shutil.which("redis-server")
        if exe is None:
            raise RedisUnavailableError(f"no redis-server on the PATH: {INSTALL_HINT}")
        args = [
            exe,
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.directory),
            "--pidfile", str(self.pid_path),
            "--logfile", str(self.log_path),
            "--daemonize", "yes",
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=max(0.1, deadline - time.monotonic()),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RedisUnavailableError(f"could not start redis-server ({exe}): {e}") from e
        if done.returncode != 0:
            reason = done.stderr.decode(errors="replace").strip().splitlines()
            raise RedisUnavailableError(
                f"redis-server exited with {done.returncode}: "
                f"{reason[-1] if reason else 'see ' + str(self.log_path)}"
            )

    def _wait_until_answering(self, deadline: float, pid: int | None) -> None:
        while time.monotonic() < deadline:
            if self.answers():
                return
            time.sleep(_POLL_S)
        who = f"redis-server (pid {pid})" if pid else "the redis-server it started"
        raise RedisUnavailableError(
            f"memq's managed Redis did not answer on {self.socket_path} in time: {who} may "
            f"still be loading its AOF; see {self.log_path}"
        )

    def _live_pid(self) -> int | None:
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _is_redis_process(pid) else None

    def _remove_stale_files(self) -> None:
        for path in (self.pid_path, self.socket_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    @contextlib.contextmanager
    def _start_lock(self, deadline: float) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise RedisUnavailableError(
                            f"another memq process is starting Redis ({self._lock_path} is "
                            "locked) and it did not finish in time"
                        ) from None
                    time.sleep(_POLL_S)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock


def ping(path: Path, timeout_s: float) -> bool:
    """The default Probe: PING through redis-py."""
    import redis  # not at import: the hook imports this module

    client = redis.Redis(
        unix_socket_path=os.fspath(path), socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )
    try:
        return client.ping() is True  # a server still loading its AOF answers LOADING: an error
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _send_shutdown(path: Path) -> None:
    import redis

    client = redis.Redis(unix_socket_path=os.fspath(path), socket_timeout=5.0)
    try:
        client.shutdown()  # returns once the server has closed the connection: it has shut down
    except (redis.RedisError, OSError):
        pass  # it did not shut down: stop() says so when the process outlives its timeout
    finally:
        client.close()


def _is_redis_process(pid: int) -> bool:
    """Whether `pid` is a live (not zombie) redis-server, so a reused pid is not mistaken."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X") and b"redis-server" in cmdline


def _wait_for_exit(pid: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if not _is_redis_process(pid):
            return True
        time.sleep(0.02)
    return False
