"""The one URL parser every Redis client is built from, and URLs shown without their secrets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from redis.connection import parse_url

from tests.support.ingest import console_script, subprocess_env
from tests.support.ports import free_port
from worker.connect.redis_url import RedisAddress, parse_redis_url
from worker.connect.sentinel import SentinelUrl
from worker.errors import ConfigError
from worker.masked_url import describe_url

# Every form docs/fleet.md's "Reaching Redis" documents, and the query options redis-py reads.
URLS = [
    "redis://localhost",
    "redis://host:6379/0",
    "redis://cache.internal:6380/3",
    "redis://user:p%40ss@host:6379/0",
    "redis://:s3cr%3At%2Fp%40ss@host/2",
    "redis://host/0?db=5",
    "redis://host/not-a-number",
    "redis://host?password=pw&username=alice",
    "redis://bob:pw1@host?password=pw2&username=alice",
    "redis://[::1]:6390/1",
    "rediss://host:6380/0",
    "rediss://host:6380/0?ssl_ca_certs=/etc/ca.pem",
    "rediss://u:p@host:6380/0?ssl_cert_reqs=none&ssl_check_hostname=false",
    "redis://host/0?socket_timeout=2.5&socket_connect_timeout=1&health_check_interval=30",
    "redis://host/0?socket_keepalive=yes&retry_on_timeout=0&max_connections=7",
    "unix:///run/redis/redis.sock",
    "unix:///run/redis/redis.sock?db=3",
    "unix://:pw@/tmp/r%20s.sock?db=1",
]


@pytest.mark.parametrize("url", URLS)
def test_every_url_is_read_as_redis_py_reads_it(url: str) -> None:
    address = parse_redis_url(url)
    assert isinstance(address, RedisAddress)
    expected = parse_url(url)
    expected.pop("connection_class", None)
    assert address.redis_kwargs() == expected
    assert address.scheme == url.partition("://")[0]


def test_sentinel_urls_go_to_the_sentinel_parser() -> None:
    parsed = parse_redis_url("redis+sentinel://u:pw@s1:26379,s2/mymaster/2")
    assert parsed == SentinelUrl(
        sentinels=[("s1", 26379), ("s2", 26379)], master="mymaster", db=2, username="u",
        password="pw",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://u:hunter2@host/0", "must start with redis://"),
        ("redis://u:hunter2@host:port/0", "the port is not a number"),
        ("redis://u:hunter2@host/0?socket_timeout=soon", "?socket_timeout= is not a valid value"),
    ],
)
def test_a_malformed_url_is_a_config_error_without_the_password(url: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_redis_url(url)
    assert fragment in str(info.value)
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("redis://alice@host/0", "redis://alice@host/0"),
        ("redis://alice:pw@host/0", "redis://alice:***@host/0"),
        ("redis://:p%40ss@host/0", "redis://:***@host/0"),
        ("redis://h/0?password=pw&db=1", "redis://h/0?password=***&db=1"),
        ("rediss://h/0?ssl_ca_certs=/ca.pem&auth_token=t&api_key=k",
         "rediss://h/0?ssl_ca_certs=/ca.pem&auth_token=***&api_key=***"),
        ("redis+sentinel://u:pw@s1,s2/m", "redis+sentinel://u:***@s1,s2/m"),
        ("unix://:pw@/tmp/r.sock?db=2", "unix://:***@/tmp/r.sock?db=2"),
        ("redis://h/0#pw", "redis://h/0#***"),
        ("redis://u:p/s?s#@h/0", "redis://u:***@h/0"),  # an unescaped password
        ("redis://h/0?password=pw@x", "redis://***@x"),
        ("not a url pw", "<not a URL>"),
    ],
)  # fmt: skip
def test_describe_url_masks_passwords_and_credential_query_values(url: str, shown: str) -> None:
    assert describe_url(url) == shown


# -- planted passwords never reach a terminal -------------------------------------------------

IN_USERINFO = "planted-userinfo-7731"
IN_QUERY = "planted-query-9925"


def _planted_url(port: int, form: str) -> str:
    if form == "userinfo":
        return f"redis://memq:{IN_USERINFO}@127.0.0.1:{port}/0"
    return f"redis://127.0.0.1:{port}/0?password={IN_QUERY}"


def _run(tmp_path: Path, url: str, *args: str, stdin: str = "", **env: str) -> str:
    done = subprocess.run(
        [console_script(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(tmp_path, url, **env),
        cwd=tmp_path,
        check=False,
    )
    return done.stdout + done.stderr


FORMS = ["userinfo", "query"]


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(("stats",), id="stats"),
        pytest.param(("redis", "status"), id="redis-status"),
        pytest.param(("hook", "claude-code"), id="hook"),
        pytest.param(("up",), id="up"),
    ],
)
def test_a_password_in_the_url_is_never_printed(
    tmp_path: Path, form: str, command: tuple[str, ...]
) -> None:
    port = free_port()  # nothing listens: each command names the Redis it could not reach
    env = {
        "OPENAI_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",  # `up` checks its observer
        "MEMQ_UI_PORT": str(free_port()),
        "MEMQ_CHROMA": "off",
    }
    stdin = (
        '{"session_id": "s1", "hook_event_name": "PostToolUse", "cwd": "/tmp", '
        '"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": "ok"}'
    )
    output = _run(tmp_path, _planted_url(port, form), *command, stdin=stdin, **env)
    assert f"127.0.0.1:{port}" in output  # the URL is shown…
    assert "***" in output  # …masked
    assert IN_USERINFO not in output
    assert IN_QUERY not in output
