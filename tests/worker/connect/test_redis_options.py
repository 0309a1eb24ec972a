"""Reaching Redis by URL: ACL user/password, `rediss://` TLS and Sentinel, for every client.

Each server here is a real private redis-server (TLS certificates made with the openssl CLI;
Sentinel is `redis-server --sentinel`). Every client is checked: the arq pool the worker runs
on, the asyncio client of the CLI and services, and the hook's tiny synchronous client.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis

from tests.support.fake_observer import FakeObserver
from tests.support.ports import free_port, wait_for_port
from tests.support.redis_server import RedisServer
from tests.support.worker_checks import observations
from tests.support.worker_harness import drain, make_settings, running_runtime, tool_call
from worker.connect.redis_client import connect_redis
from worker.connect.sentinel import SentinelUrl, parse_sentinel_url
from worker.errors import ConfigError, RedisUnavailableError
from worker.ingest.producer import SyncProducer, prepare_event
from worker.ingest.sync_redis import connect_sync
from worker.queue.arq_pool import connect_arq
from worker.settings import Settings, load_settings

LOCAL_SAN = "IP:127.0.0.1,DNS:localhost"
PASSWORD = "s3cr:t/p@ss"  # URL-escaped in every URL below
ESCAPED = "s3cr%3At%2Fp%40ss"


def _settings(tmp_path: Path, url: str) -> Settings:
    return load_settings({"MEMQ_REDIS_URL": url, "MEMQ_DATA_DIR": str(tmp_path)})


async def _via_arq(settings: Settings, key: str) -> None:
    redis = await connect_arq(settings)
    try:
        await redis.set(key, "arq")
    finally:
        await redis.aclose()


async def _via_asyncio(settings: Settings, key: str) -> None:
    redis = await connect_redis(settings, timeout_ms=3000)
    try:
        await redis.set(key, "asyncio")
    finally:
        await redis.aclose()


async def _via_sync(settings: Settings, key: str) -> None:
    client = connect_sync(settings, timeout_ms=3000)
    try:
        assert client.execute("SET", key, "sync") == b"OK"
    finally:
        client.close()


Client = Callable[[Settings, str], Awaitable[None]]
CLIENTS = [
    pytest.param(_via_arq, id="arq-pool"),
    pytest.param(_via_asyncio, id="asyncio"),
    pytest.param(_via_sync, id="sync-hook"),
]


# -- servers ----------------------------------------------------------------------------------


@pytest.fixture(name="acl_server")
def _fix_acl_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server whose default user is off: only `memq` with PASSWORD gets in."""
    server = RedisServer(tmp_path / "acl").start()
    admin = sync_redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", "memq", "on", f">{PASSWORD}", "~*", "&*", "+@all")
    admin.execute_command("ACL", "SETUSER", "default", "off")
    admin.close()
    yield server
    server.stop()


class TlsServer:
    """A redis-server speaking only TLS, with a CA of its own."""

    def __init__(self, workdir: Path, san: str = LOCAL_SAN) -> None:
        self.workdir = workdir
        self.ca = workdir / "ca.crt"
        self.port = free_port()
        _make_certificates(workdir, san)
        self.proc = subprocess.Popen(
            [
                _exe("redis-server"),
                "--port", "0",
                "--tls-port", str(self.port),
                "--bind", "127.0.0.1",
                "--tls-cert-file", str(workdir / "server.crt"),
                "--tls-key-file", str(workdir / "server.key"),
                "--tls-ca-cert-file", str(self.ca),
                "--tls-auth-clients", "no",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for_port(self.port)

    def url(self, query: str) -> str:
        return f"rediss://127.0.0.1:{self.port}/0?{query}"

    def read(self, key: str) -> bytes | None:
        client = sync_redis.Redis(port=self.port, ssl=True, ssl_ca_certs=str(self.ca))
        try:
            value: bytes | None = client.get(key)  # type: ignore[assignment]
            return value
        finally:
            client.close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(name="tls_server")
def _fix_tls_server(tmp_path: Path) -> Iterator[TlsServer]:
    server = TlsServer(tmp_path / "tls")
    yield server
    server.stop()


class SentinelServer:
    """`redis-server --sentinel` watching one master under the name `mymaster`."""

    def __init__(self, workdir: Path, master_port: int) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = workdir / "sentinel.conf"  # the sentinel rewrites it: it must be its own
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {workdir}\n"
            f"sentinel monitor mymaster 127.0.0.1 {master_port} 1\n"
            f"sentinel auth-user mymaster memq\nsentinel auth-pass mymaster {PASSWORD}\n"
        )
        self.proc = subprocess.Popen(
            [_exe("redis-server"), str(config), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(name="sentinel")
def _fix_sentinel(tmp_path: Path, acl_server: RedisServer) -> Iterator[SentinelServer]:
    server = SentinelServer(tmp_path / "sentinel", acl_server.port)
    yield server
    server.stop()


def _exe(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} missing: scripts/test installs it")
    return path


def _make_certificates(workdir: Path, san: str = LOCAL_SAN) -> None:
    """A CA and a server certificate for `san` (127.0.0.1 and localhost by default)."""
    workdir.mkdir(parents=True, exist_ok=True)
    openssl = _exe("openssl")
    (workdir / "san.ext").write_text(f"subjectAltName={san}\n")
    for args in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
         "-days", "2", "-subj", "/CN=memq test CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext"],
    ):  # fmt: skip
        subprocess.run([openssl, *args], cwd=workdir, check=True, capture_output=True)


def _read(server: RedisServer, key: str) -> Any:
    client = sync_redis.Redis(port=server.port, username="memq", password=PASSWORD)
    try:
        return client.get(key)
    finally:
        client.close()


# -- ACL ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
async def test_an_acl_user_and_password_in_the_url_log_in(
    tmp_path: Path, acl_server: RedisServer, client: Client
) -> None:
    url = f"redis://memq:{ESCAPED}@127.0.0.1:{acl_server.port}/0"
    await client(_settings(tmp_path, url), "acl-key")
    assert _read(acl_server, "acl-key") is not None


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("userinfo", ["memq:wrong-password@", ""], ids=["wrong", "none"])
async def test_refused_credentials_are_one_line_without_the_password(
    tmp_path: Path, acl_server: RedisServer, client: Client, userinfo: str
) -> None:
    url = f"redis://{userinfo}127.0.0.1:{acl_server.port}/0"
    with pytest.raises(RedisUnavailableError) as info:
        await client(_settings(tmp_path, url), "nope")
    message = str(info.value)
    assert "wrong-password" not in message
    assert "\n" not in message


# -- TLS ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("verify", ["ca", "none"])
async def test_rediss_urls_speak_tls_verified_by_a_ca_file_or_unverified(
    tmp_path: Path, tls_server: TlsServer, client: Client, verify: str
) -> None:
    query = f"ssl_ca_certs={tls_server.ca}" if verify == "ca" else "ssl_cert_reqs=none"
    await client(_settings(tmp_path, tls_server.url(query)), f"tls-{verify}")
    assert tls_server.read(f"tls-{verify}") is not None


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_server_certificate_from_an_unknown_ca_is_refused(
    tmp_path: Path, tls_server: TlsServer, client: Client
) -> None:
    stranger = tmp_path / "stranger"
    _make_certificates(stranger)
    url = tls_server.url(f"ssl_ca_certs={stranger / 'ca.crt'}")
    with pytest.raises(RedisUnavailableError, match=r"cannot reach Redis|lost Redis|refused"):
        await client(_settings(tmp_path, url), "tls-bad")
    assert tls_server.read("tls-bad") is None


@pytest.mark.parametrize("client", CLIENTS)
async def test_ssl_check_hostname_false_accepts_a_certificate_for_another_name(
    tmp_path: Path, client: Client
) -> None:
    server = TlsServer(tmp_path / "elsewhere", san="DNS:elsewhere.invalid")
    try:
        url = server.url(f"ssl_ca_certs={server.ca}&ssl_check_hostname=false")
        await client(_settings(tmp_path, url), "tls-elsewhere")
        assert server.read("tls-elsewhere") is not None
    finally:
        server.stop()


async def test_the_hook_client_checks_the_certificates_host_name(tmp_path: Path) -> None:
    server = TlsServer(tmp_path / "elsewhere", san="DNS:elsewhere.invalid")
    try:
        with pytest.raises(RedisUnavailableError, match="cannot reach Redis"):
            await _via_sync(_settings(tmp_path, server.url(f"ssl_ca_certs={server.ca}")), "k")
    finally:
        server.stop()


@pytest.mark.parametrize("client", CLIENTS)
async def test_plain_redis_to_a_tls_only_server_fails_fast(
    tmp_path: Path, tls_server: TlsServer, client: Client
) -> None:
    url = f"redis://127.0.0.1:{tls_server.port}/0"
    with pytest.raises(RedisUnavailableError):
        await client(_settings(tmp_path, url), "plain")


# -- Sentinel -----------------------------------------------------------------------------------

SENTINEL_URLS = [
    (
        "redis+sentinel://h1:26380,h2/mymaster",
        SentinelUrl(sentinels=[("h1", 26380), ("h2", 26379)], master="mymaster"),
    ),
    (
        f"rediss+sentinel://memq:{ESCAPED}@[::1]:5000/cache/3",
        SentinelUrl(
            sentinels=[("::1", 5000)],
            master="cache",
            db=3,
            username="memq",
            password=PASSWORD,
            ssl=True,
        ),
    ),
]


@pytest.mark.parametrize(("url", "parsed"), SENTINEL_URLS)
def test_sentinel_urls_name_the_sentinels_master_db_and_credentials(
    url: str, parsed: SentinelUrl
) -> None:
    assert parse_sentinel_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("redis+sentinel://u:hunter2@h1:26379", "/<master name>"),
        ("redis+sentinel://u:hunter2@h1:26379/m/x", "/<master name>"),
        ("redis+sentinel://u:hunter2@h1:port/m", "not a sentinel host:port"),
        ("redis+sentinel://u:hunter2@h1/m?ssl_ca_certs=/ca", "no ?options"),
    ],
)
def test_a_malformed_sentinel_url_is_a_config_error_without_the_password(
    url: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sentinel_url(url)
    assert fragment in str(info.value)
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("client", CLIENTS)
async def test_a_sentinel_url_reaches_the_master_the_sentinel_names(
    tmp_path: Path, acl_server: RedisServer, sentinel: SentinelServer, client: Client
) -> None:
    # The first sentinel listed is down: the next one answers.
    hosts = f"127.0.0.1:{free_port()},127.0.0.1:{sentinel.port}"
    url = f"redis+sentinel://memq:{ESCAPED}@{hosts}/mymaster/0"
    await client(_settings(tmp_path, url), "via-sentinel")
    assert _read(acl_server, "via-sentinel") is not None


@pytest.mark.parametrize("client", CLIENTS)
async def test_an_unknown_master_name_is_unavailable_not_a_crash(
    tmp_path: Path, sentinel: SentinelServer, client: Client
) -> None:
    url = f"redis+sentinel://127.0.0.1:{sentinel.port}/nosuchmaster"
    with pytest.raises(RedisUnavailableError):
        await client(_settings(tmp_path, url), "never")


async def test_the_worker_and_the_hook_producer_run_through_sentinel(
    tmp_path: Path, acl_server: RedisServer, sentinel: SentinelServer, fake_observer: FakeObserver
) -> None:
    url = f"redis+sentinel://memq:{ESCAPED}@127.0.0.1:{sentinel.port}/mymaster"
    settings = make_settings(tmp_path, url, fake_observer.url)
    with SyncProducer.connect(settings) as producer:
        producer.publish_many([prepare_event(tool_call("st1", n), settings) for n in range(3)])
    redis = await connect_arq(settings)
    try:
        async with running_runtime(settings, redis) as rt:
            await drain(rt, redis)
    finally:
        await redis.aclose()
    assert len(await observations(settings, "st1")) == 3
