"""The managed redis-server: start on demand, reuse, one server for racing starters, stop."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from pipeline.events import Prompt
from tests.support.ingest import console_script, short_data_dir, subprocess_env
from worker.connect.managed_redis import ManagedRedis
from worker.errors import RedisUnavailableError
from worker.ingest.producer import SyncProducer, prepare_event
from worker.keys import Keys
from worker.settings import Settings

_PRINT_PID = (
    "import sys; from pathlib import Path; from worker.connect.managed_redis import ManagedRedis; "
    "m = ManagedRedis(Path(sys.argv[1])); m.ensure_running(); print(m.status().pid)"
)

pytestmark = pytest.mark.slow  # runs the memq console script or redis-server processes


@pytest.fixture(name="data_dir")
def _fix_data_dir() -> Iterator[Path]:
    with short_data_dir() as path:
        yield path
        ManagedRedis(path).stop()  # the server is daemonized: never leave one behind


def _client(managed: ManagedRedis) -> redis.Redis:
    return redis.Redis(unix_socket_path=str(managed.socket_path))


def _servers_on(socket_path: Path) -> list[int]:
    """Pids of redis-server processes serving this socket (from /proc)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"redis-server" in cmdline and str(socket_path).encode() in cmdline:
            pids.append(int(proc.name))
    return pids


def test_first_use_starts_a_daemonized_server_with_aof_on_a_unix_socket(data_dir: Path) -> None:
    managed = ManagedRedis(data_dir)
    assert managed.status().running is False
    assert managed.ensure_running() == data_dir / "redis" / "redis.sock"
    status = managed.status()
    assert status.running
    assert status.pid == int((data_dir / "redis" / "redis.pid").read_text())
    config = _client(managed).config_get("*")
    assert (config["appendonly"], config["appendfsync"], config["port"]) == ("yes", "everysec", "0")
    assert Path(config["dir"]) == data_dir / "redis"


def test_a_second_process_reuses_the_running_server(data_dir: Path) -> None:
    managed = ManagedRedis(data_dir)
    managed.ensure_running()
    first = managed.status().pid
    done = subprocess.run(
        [sys.executable, "-c", _PRINT_PID, str(data_dir)],
        capture_output=True,
        text=True,
        timeout=30,
        env=subprocess_env(data_dir),
        check=True,
    )
    assert int(done.stdout) == first
    assert _servers_on(managed.socket_path) == [first]


def test_processes_starting_at_once_share_one_server(data_dir: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PRINT_PID, str(data_dir)],
            stdout=subprocess.PIPE,
            text=True,
            env=subprocess_env(data_dir),
        )
        for _ in range(3)
    ]
    pids = {int(p.communicate(timeout=30)[0]) for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(pids) == 1
    assert _servers_on(data_dir / "redis" / "redis.sock") == list(pids)


def test_stop_shuts_the_server_down_and_cleans_up(data_dir: Path) -> None:
    managed = ManagedRedis(data_dir)
    managed.ensure_running()
    assert managed.stop() is True
    assert managed.status().running is False
    assert not managed.socket_path.exists()
    assert not managed.pid_path.exists()
    assert managed.stop() is False


def test_a_stale_pidfile_and_socket_are_cleaned_before_a_start(data_dir: Path) -> None:
    managed = ManagedRedis(data_dir)
    managed.directory.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    managed.pid_path.write_text(f"{dead.pid}\n")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(managed.socket_path))  # a socket file nobody listens on
    managed.ensure_running()
    assert managed.status().running
    assert managed.status().pid != dead.pid


def test_queued_events_survive_a_restart(data_dir: Path) -> None:
    settings = Settings(data_dir=str(data_dir))
    event = Prompt(
        event_id="p1",
        memory_session_id="s1",
        project="shop",
        occurred_at=datetime(2026, 5, 1, tzinfo=UTC),
        prompt_text="hello",
    )
    with SyncProducer.connect(settings) as producer:
        producer.publish(prepare_event(event, settings))
    managed = ManagedRedis(data_dir)
    managed.stop()
    managed.ensure_running()
    assert _client(managed).xlen(Keys("memq").events("s1")) == 1


def test_no_redis_server_binary_says_how_to_get_one(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(data_dir))
    with pytest.raises(
        RedisUnavailableError, match=r"apt-get install redis-server.*MEMQ_REDIS_URL"
    ):
        ManagedRedis(data_dir).ensure_running()


def test_a_data_dir_too_long_for_a_socket_is_refused_with_advice(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    with pytest.raises(RedisUnavailableError, match="MEMQ_DATA_DIR"):
        ManagedRedis(deep).ensure_running()


def _memq(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=subprocess_env(data_dir, **env),
        check=False,
    )


def test_memq_redis_status_and_stop(data_dir: Path) -> None:
    assert _memq(data_dir, "redis", "status").stdout.startswith("not running")
    ManagedRedis(data_dir).ensure_running()
    pid = ManagedRedis(data_dir).status().pid
    assert _memq(data_dir, "redis", "status").stdout.startswith(f"running (pid {pid}) on ")
    status = json.loads(_memq(data_dir, "redis", "status", "--json").stdout)
    assert (status["managed"], status["running"], status["pid"]) == (True, True, pid)
    stopped = _memq(data_dir, "redis", "stop")
    assert (stopped.returncode, stopped.stdout) == (0, "stopped\n")
    assert _memq(data_dir, "redis", "stop").stdout == "not running\n"


def test_memq_redis_stop_leaves_an_external_redis_alone(data_dir: Path, redis_url: str) -> None:
    done = _memq(data_dir, "redis", "stop", MEMQ_REDIS_URL=redis_url)
    assert done.returncode == 2
    assert done.stderr.startswith("memq: MEMQ_REDIS_URL is set")
