"""Reaching Redis: MEMQ_REDIS_URL or the managed server, async (redis-py) or a tiny sync client.

The sync client speaks RESP over one socket with hiredis' parser and nothing else: the
Claude Code hook runs once per tool call and importing redis-py alone costs ~0.1 s.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import hiredis

from worker.connect.managed_redis import ManagedRedis
from worker.connect.sentinel import (
    SentinelUrl,
    is_sentinel_url,
    parse_sentinel_url,
    sentinel_master,
)
from worker.errors import ConfigError, RedisUnavailableError
from worker.settings import Settings

if TYPE_CHECKING:
    from redis.asyncio import Redis

Arg = str | bytes | int | float
DEFAULT_START_TIMEOUT_S = 10.0


def redis_url(settings: Settings, *, start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> str:
    """MEMQ_REDIS_URL, or the managed server's socket URL (starting the server if needed)."""
    if settings.redis_url:
        return settings.redis_url
    managed = ManagedRedis(settings.data_path)
    managed.ensure_running(start_timeout_s)
    return managed.url


def describe_url(url: str) -> str:
    """The URL without its password, for messages."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return parts._replace(netloc=user + netloc).geturl()


async def connect_redis(settings: Settings, *, timeout_ms: int | None = None) -> Redis:
    """An asyncio redis-py client that answered PING; RedisUnavailableError otherwise."""
    import asyncio

    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    url = await asyncio.to_thread(redis_url, settings)
    timeout = timeout_ms / 1000 if timeout_ms else None
    try:
        if is_sentinel_url(url):
            client = sentinel_master(parse_sentinel_url(url), Redis, timeout_s=timeout)
        else:
            client = Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    except ValueError as e:
        raise ConfigError(f"MEMQ_REDIS_URL is not a Redis URL: {e}") from e
    try:
        await client.ping()
    except (RedisError, OSError) as e:
        await client.aclose()
        raise RedisUnavailableError(f"cannot reach Redis at {describe_url(url)}: {e}") from e
    return client


class SyncRedis:
    """One blocking RESP connection; every socket operation is bounded by `timeout_s`."""

    def __init__(self, sock: socket.socket, where: str) -> None:
        self._sock = sock
        self._reader = hiredis.Reader()
        self.where = where

    def execute(self, *args: Arg) -> Any:
        """Send one command and return its reply (an error reply raises RedisUnavailableError)."""
        (reply,) = self.pipeline([args])
        if isinstance(reply, hiredis.ReplyError):
            raise RedisUnavailableError(f"Redis at {self.where} refused {args[0]!r}: {reply}")
        return reply

    def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """Send commands in one write and read their replies in order (error replies included)."""
        try:
            self._sock.sendall(b"".join(_pack(c) for c in commands))
            replies: list[Any] = []
            while len(replies) < len(commands):
                reply = self._reader.gets()
                if reply is False:
                    chunk = self._sock.recv(1 << 16)
                    if not chunk:
                        raise ConnectionError("connection closed by the server")
                    self._reader.feed(chunk)
                    continue
                replies.append(reply)
            return replies
        except TimeoutError as e:
            raise RedisUnavailableError(f"no answer from Redis at {self.where} in time") from e
        except (OSError, hiredis.ProtocolError) as e:
            raise RedisUnavailableError(f"lost Redis at {self.where}: {e}") from e

    def close(self) -> None:
        """Close the socket."""
        self._sock.close()


def connect_sync(
    settings: Settings,
    *,
    timeout_ms: int,
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
) -> SyncRedis:
    """A SyncRedis on MEMQ_REDIS_URL or the managed server (started on demand)."""
    timeout_s = timeout_ms / 1000
    if settings.redis_url and is_sentinel_url(settings.redis_url):
        return _open_sentinel(parse_sentinel_url(settings.redis_url), timeout_s)
    if settings.redis_url:
        return _open(settings.redis_url, timeout_s)
    managed = ManagedRedis(settings.data_path)
    try:
        return _open_unix(str(managed.socket_path), timeout_s)
    except RedisUnavailableError:
        managed.ensure_running(start_timeout_s)
        return _open_unix(str(managed.socket_path), timeout_s)


def _open_unix(path: str, timeout_s: float) -> SyncRedis:
    # The managed server: no URL to parse (urllib costs the hook a few ms).
    try:
        sock = _connect_unix(path, timeout_s)
    except TimeoutError as e:
        raise RedisUnavailableError(f"no answer from Redis at unix://{path} in time") from e
    except OSError as e:
        raise RedisUnavailableError(f"cannot reach Redis at unix://{path}: {e}") from e
    return _handshake(SyncRedis(sock, f"unix://{path}"), [])


def _connect_unix(path: str, timeout_s: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _open(url: str, timeout_s: float) -> SyncRedis:
    from urllib.parse import parse_qs, unquote, urlsplit

    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    password = unquote(parts.password) if parts.password else query.get("password")
    username = unquote(parts.username) if parts.username else None
    where = describe_url(url)
    try:
        if parts.scheme == "unix":
            sock = _connect_unix(parts.path, timeout_s)
            db = query.get("db", "0")
        elif parts.scheme in ("redis", "rediss"):
            address = (parts.hostname or "localhost", parts.port or 6379)
            sock = socket.create_connection(address, timeout=timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if parts.scheme == "rediss":
                try:
                    sock = _wrap_tls(sock, parts.hostname, query)
                except BaseException:
                    sock.close()
                    raise
            db = parts.path.lstrip("/") or query.get("db", "0")
        else:
            raise ConfigError(
                f"MEMQ_REDIS_URL {where} must start with redis://, rediss:// or unix://"
            )
    except TimeoutError as e:
        raise RedisUnavailableError(f"no answer from Redis at {where} in time") from e
    except OSError as e:
        raise RedisUnavailableError(f"cannot reach Redis at {where}: {e}") from e
    setup: list[list[Arg]] = []
    if password is not None:
        setup.append(["AUTH", username, password] if username else ["AUTH", password])
    if db not in ("", "0"):
        setup.append(["SELECT", db])
    return _handshake(SyncRedis(sock, where), setup)


def _open_sentinel(parsed: SentinelUrl, timeout_s: float) -> SyncRedis:
    """Ask the sentinels in turn where the master is, then connect to it."""
    from urllib.parse import quote

    failures: list[str] = []
    for host, port in parsed.sentinels:
        try:
            sentinel = _open(f"redis://{host}:{port}", timeout_s)
        except RedisUnavailableError as e:
            failures.append(str(e))
            continue
        try:
            address = sentinel.execute("SENTINEL", "get-master-addr-by-name", parsed.master)
        except RedisUnavailableError as e:
            failures.append(str(e))
            continue
        finally:
            sentinel.close()
        if address:
            master_host, master_port = (_text(v) for v in address)
            scheme = "rediss" if parsed.ssl else "redis"
            user = quote(parsed.username or "", safe="")
            auth = f"{user}:{quote(parsed.password, safe='')}@" if parsed.password else ""
            where = f"{scheme}://{auth}{master_host}:{master_port}/{parsed.db}"
            return _open(where, timeout_s)
        failures.append(f"sentinel {host}:{port} knows no master {parsed.master!r}")
    raise RedisUnavailableError(f"no sentinel named a master: {'; '.join(failures)}")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _handshake(client: SyncRedis, setup: list[list[Arg]]) -> SyncRedis:
    """Authenticate and select the database, then PING: a server that never answers fails here."""
    try:
        for reply in client.pipeline([*setup, ["PING"]]):
            if isinstance(reply, hiredis.ReplyError):
                raise RedisUnavailableError(
                    f"Redis at {client.where} refused the connection: {reply}"
                )
    except BaseException:
        client.close()
        raise
    return client


def _wrap_tls(sock: socket.socket, hostname: str | None, query: dict[str, str]) -> socket.socket:
    import ssl

    context = ssl.create_default_context(cafile=query.get("ssl_ca_certs"))
    if query.get("ssl_cert_reqs", "required").lower() == "none":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context.wrap_socket(sock, server_hostname=hostname)


def _pack(args: Sequence[Arg]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)
