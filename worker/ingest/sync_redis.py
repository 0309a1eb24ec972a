"""The hook's small blocking Redis client: RESP over one socket, parsed by hiredis.

Kept instead of redis-py's sync client because importing redis-py doubles the Claude Code
hook's time (docs/fleet.md, "Reaching Redis"). URLs are read by the one shared parser
(`worker.connect.redis_url`), so this client takes every form the others take.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hiredis

from worker.connect.managed_redis import DEFAULT_START_TIMEOUT_S, ManagedRedis
from worker.connect.redis_url import RedisAddress, parse_redis_url
from worker.connect.sentinel import SentinelUrl
from worker.errors import RedisUnavailableError
from worker.masked_url import describe_url
from worker.redis_text import as_text
from worker.settings import Settings

Arg = str | bytes | int | float


class SyncRedis:
    """One blocking RESP connection; every socket operation is bounded by `timeout_s`."""

    def __init__(self, sock: socket.socket, where: str) -> None:
        self._sock = sock
        self._reader = hiredis.Reader()
        self.where = where

    @property
    def timeout_ms(self) -> int:
        """The bound on every socket operation, in milliseconds."""
        timeout = self._sock.gettimeout()
        return int(timeout * 1000) if timeout is not None else 0

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
    if settings.redis_url:
        target = parse_redis_url(settings.redis_url)
        if isinstance(target, SentinelUrl):
            return _open_sentinel(target, timeout_s)
        return _open(target, timeout_s, describe_url(settings.redis_url))
    # The managed server: no URL to parse, and no redis-py to ask whether it runs.
    managed = ManagedRedis(settings.data_path, probe=answers)
    address = RedisAddress(scheme="unix", path=str(managed.socket_path))
    try:
        return _open(address, timeout_s, managed.url)
    except RedisUnavailableError:
        managed.ensure_running(start_timeout_s)
        return _open(address, timeout_s, managed.url)


def answers(path: Path, timeout_s: float) -> bool:
    """Whether a server answers PING on the unix socket at path (ManagedRedis's probe)."""
    try:
        _open(RedisAddress(scheme="unix", path=str(path)), timeout_s, f"unix://{path}").close()
    except RedisUnavailableError:
        return False  # also a server still loading its AOF (it answers LOADING)
    return True


def _open(address: RedisAddress, timeout_s: float, where: str) -> SyncRedis:
    """Connect, authenticate and select the database as redis-py would for this address."""
    try:
        if address.scheme == "unix":
            sock = _connect_unix(address.path or "", timeout_s)
        else:
            sock = socket.create_connection(
                (address.host or "localhost", address.port or 6379), timeout=timeout_s
            )
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if address.scheme == "rediss":
                try:
                    sock = _wrap_tls(sock, address)
                except BaseException:
                    sock.close()
                    raise
    except TimeoutError as e:
        raise RedisUnavailableError(f"no answer from Redis at {where} in time") from e
    except OSError as e:
        raise RedisUnavailableError(f"cannot reach Redis at {where}: {e}") from e
    setup: list[list[Arg]] = []
    if address.password is not None:
        user = address.username
        setup.append(["AUTH", user, address.password] if user else ["AUTH", address.password])
    if address.db:
        setup.append(["SELECT", address.db])
    return _handshake(SyncRedis(sock, where), setup)


def _connect_unix(path: str, timeout_s: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _open_sentinel(parsed: SentinelUrl, timeout_s: float) -> SyncRedis:
    """Ask the sentinels in turn where the master is, then connect to it."""
    failures: list[str] = []
    for host, port in parsed.sentinels:
        where = f"redis://{host}:{port}"
        try:
            sentinel = _open(RedisAddress(scheme="redis", host=host, port=port), timeout_s, where)
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
            master_host, master_port = (as_text(v) for v in address)
            master = RedisAddress(
                scheme="rediss" if parsed.ssl else "redis",
                host=master_host,
                port=int(master_port),
                db=parsed.db,
                username=parsed.username,
                password=parsed.password,
            )
            auth = f"{parsed.username or ''}:***@" if parsed.password else ""
            return _open(master, timeout_s, f"{master.scheme}://{auth}{master_host}:{master_port}")
        failures.append(f"sentinel {host}:{port} knows no master {parsed.master!r}")
    raise RedisUnavailableError(f"no sentinel named a master: {'; '.join(failures)}")


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


def _wrap_tls(sock: socket.socket, address: RedisAddress) -> socket.socket:
    import ssl

    # The TLS options of redis-py's URLs that memq documents (docs/fleet.md, "Reaching Redis").
    context = ssl.create_default_context(cafile=address.options.get("ssl_ca_certs"))
    if str(address.options.get("ssl_cert_reqs", "required")).lower() == "none":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif address.options.get("ssl_check_hostname") is False:
        context.check_hostname = False  # the certificate is still verified against the CAs
    return context.wrap_socket(sock, server_hostname=address.host)


def _pack(args: Sequence[Arg]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)
