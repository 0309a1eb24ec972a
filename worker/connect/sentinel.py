"""Redis Sentinel URLs: `redis+sentinel://[user:password@]host:port[,host:port…]/master[/db]`.

Clients are made the way arq's Sentinel support makes them (`RedisSettings(sentinel=True, …)`),
so a URL says what that passes on: the sentinels, the master's name, the database, the
master's ACL user and password, and TLS to the master (`rediss+sentinel://`, checked
against the system's CA store). Sentinels themselves are reached in plain text, unauthenticated.
Nothing heavy at import: the Claude Code hook parses these URLs too.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from worker.errors import ConfigError
from worker.masked_url import describe_url

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.sentinel import SentinelConnectionPool

R = TypeVar("R", bound="Redis")

SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_SENTINEL_PORT = 26379


class SentinelUrl(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed `redis+sentinel://` URL."""

    sentinels: list[tuple[str, int]]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False


def is_sentinel_url(url: str) -> bool:
    """True for `redis+sentinel://` and `rediss+sentinel://` URLs."""
    return url.split("://", 1)[0].lower() in SCHEMES


def parse_sentinel_url(url: str) -> SentinelUrl:
    """Parse a Sentinel URL; ConfigError (one line, no password) when it is malformed."""
    from urllib.parse import unquote  # not at import: the hook pays for every module it loads

    scheme, sep, rest = url.partition("://")
    netloc, _, path = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    shown = describe_url(url)
    if not sep or scheme.lower() not in SCHEMES:
        raise ConfigError(f"MEMQ_REDIS_URL {shown} must start with redis+sentinel://")
    path, _, query = path.partition("?")
    if query:
        raise ConfigError(
            f"MEMQ_REDIS_URL {shown}: Sentinel URLs take no ?options (arq passes only the "
            "master's db, user, password and TLS on)"
        )
    parts = [p for p in path.split("/") if p]
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ConfigError(f"MEMQ_REDIS_URL {shown}: the path must be /<master name>[/<db number>]")
    return SentinelUrl(
        sentinels=[_host_port(h, shown) for h in hosts.split(",")],
        master=unquote(parts[0]),
        db=int(parts[1]) if len(parts) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) if password else None,
        ssl=scheme.lower() == "rediss+sentinel",
    )


def sentinel_master(
    parsed: SentinelUrl, redis_class: type[R], *, timeout_s: float | None = None, **options: Any
) -> R:
    """A client of `redis_class` on the master the sentinels name; it follows a failover.

    The client arq's `RedisSettings(sentinel=True, …)` makes (`Sentinel(…).master_for`), built
    here so that every memq client gets it alike, and so that closing it also closes the
    connections to the sentinels (redis-py leaves those open).
    """
    from redis.asyncio.sentinel import Sentinel

    kwargs: dict[str, Any] = {
        **options,
        "db": parsed.db,
        "username": parsed.username,
        "password": parsed.password,
        "ssl": parsed.ssl,
    }
    if timeout_s is not None:
        kwargs |= {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    sentinel = Sentinel(parsed.sentinels, **kwargs)  # type: ignore[no-untyped-call]
    client: R = sentinel.master_for(
        parsed.master, redis_class=redis_class, connection_pool_class=_closing_pool()
    )
    return client


@functools.cache
def _closing_pool() -> type[SentinelConnectionPool]:
    # Built on first use: redis-py is too slow an import for the hook, which only parses URLs.
    from redis.asyncio.connection import SSLConnection
    from redis.asyncio.retry import Retry
    from redis.asyncio.sentinel import SentinelConnectionPool, SentinelManagedConnection
    from redis.backoff import NoBackoff

    from worker.connect.primary import note_primary

    class FollowingConnection(SentinelManagedConnection):
        """Asks the sentinels again on every reconnect attempt.

        redis-py's own connect retries the address it was given: in a failover, the dead
        primary's, until the client's retries run out or that primary comes back, empty and
        calling itself master until a sentinel converts it, and takes the writes (tested).
        """

        async def connect_to(self, address: tuple[str, int]) -> None:
            # One try per address; the retries of `connect` (client's) each resolve again.
            retry, self.retry = self.retry, Retry(NoBackoff(), 0)
            try:
                await super().connect_to(address)  # type: ignore[no-untyped-call]
            finally:
                self.retry = retry

    class FollowingSSLConnection(FollowingConnection, SSLConnection):
        """FollowingConnection over TLS."""

    class ClosingSentinelPool(SentinelConnectionPool):
        """Disconnecting the master's pool also closes the sentinels' connections; each master
        the sentinels name is noted (a failover is logged once and counted)."""

        def __init__(self, service_name: str, sentinel_manager: Any, **kwargs: Any) -> None:
            tls = kwargs.pop("ssl", False)
            kwargs["connection_class"] = FollowingSSLConnection if tls else FollowingConnection
            super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]

        async def get_master_address(self) -> tuple[str, int]:
            address: tuple[str, int] = await super().get_master_address()  # type: ignore[no-untyped-call]
            sentinels = [_sentinel_address(s) for s in self.sentinel_manager.sentinels]
            note_primary(self.service_name, sentinels, address)
            return address

        async def disconnect(self, inuse_connections: bool = True) -> None:
            await super().disconnect(inuse_connections)
            for sentinel in self.sentinel_manager.sentinels:
                await sentinel.aclose()

    return ClosingSentinelPool


def _sentinel_address(sentinel: Redis) -> str:
    kwargs = sentinel.connection_pool.connection_kwargs
    return f"{kwargs.get('host')}:{kwargs.get('port')}"


def _host_port(text: str, shown: str) -> tuple[str, int]:
    host, port = text.strip(), ""
    if host.startswith("["):  # [::1]:26379
        host, _, after = host[1:].partition("]")
        port = after.removeprefix(":")
    elif host.count(":") == 1:
        host, _, port = host.partition(":")
    if not host or (port and not port.isdigit()):
        raise ConfigError(f"MEMQ_REDIS_URL {shown}: {text!r} is not a sentinel host:port")
    return host, int(port) if port else DEFAULT_SENTINEL_PORT
