"""MEMQ_REDIS_URL, parsed once for every client, as redis-py's `parse_url` reads it.

Every memq client (arq pool, asyncio client, the hook's small sync client) is built from
what `parse_redis_url` returns, so they all read a URL alike; a test holds the result equal
to redis-py's own `parse_url`. Nothing heavy at import: the Claude Code hook parses URLs too.
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

import msgspec

from worker.connect.sentinel import SentinelUrl, is_sentinel_url, parse_sentinel_url
from worker.errors import ConfigError
from worker.masked_url import describe_url

SCHEMES = ("redis", "rediss", "unix")
_FALSE = ("0", "F", "FALSE", "N", "NO")


def _to_bool(value: str) -> bool | None:
    return None if value == "" else value.upper() not in _FALSE


# Query options redis-py converts (redis.connection.URL_QUERY_ARGUMENT_PARSERS); the others
# are passed on as text, as redis-py passes them.
_QUERY_PARSERS: dict[str, Any] = {
    "db": int,
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "socket_keepalive": _to_bool,
    "retry_on_timeout": _to_bool,
    "retry_on_error": list,
    "max_connections": int,
    "health_check_interval": int,
    "ssl_check_hostname": _to_bool,
    "timeout": float,
}


class RedisAddress(msgspec.Struct, frozen=True, kw_only=True):
    """A `redis://`, `rediss://` or `unix://` URL: where Redis is, how to log in, its options."""

    scheme: Literal["redis", "rediss", "unix"]
    host: str | None = None
    port: int | None = None
    path: str | None = None
    db: int | None = None
    username: str | None = None
    password: str | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    """The other query options (`ssl_ca_certs`, `socket_timeout`, …), typed as redis-py does."""

    def redis_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for a redis-py connection pool (its connection class aside)."""
        named = {"host": self.host, "port": self.port, "path": self.path, "db": self.db,
                 "username": self.username, "password": self.password}  # fmt: skip
        return {**self.options, **{k: v for k, v in named.items() if v is not None}}


def parse_redis_url(url: str) -> RedisAddress | SentinelUrl:
    """Parse MEMQ_REDIS_URL; ConfigError (one line, credentials masked) when it is malformed."""
    if is_sentinel_url(url):
        return parse_sentinel_url(url)
    from urllib.parse import parse_qs, unquote, urlparse  # not at import: the hook pays for it

    scheme = url.partition("://")[0]
    if scheme not in SCHEMES:
        raise ConfigError(
            f"MEMQ_REDIS_URL {describe_url(url)} must start with redis://, rediss://, unix:// "
            "or redis+sentinel://"
        )
    parts = urlparse(url)
    options: dict[str, Any] = {}
    for name, values in parse_qs(parts.query).items():
        value = unquote(values[0])
        parser = _QUERY_PARSERS.get(name)
        try:
            options[name] = parser(value) if parser else value
        except (TypeError, ValueError):
            raise ConfigError(
                f"MEMQ_REDIS_URL {describe_url(url)}: ?{name}= is not a valid value"
            ) from None
    db, username, password = (options.pop(k, None) for k in ("db", "username", "password"))
    username = unquote(parts.username) if parts.username else username
    password = unquote(parts.password) if parts.password else password
    if scheme == "unix":
        path = unquote(parts.path) if parts.path else None
        return RedisAddress(scheme="unix", path=path, db=db, username=username,
                            password=password, options=options)  # fmt: skip
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"MEMQ_REDIS_URL {describe_url(url)}: the port is not a number") from None
    if db is None and parts.path:
        with contextlib.suppress(ValueError):  # as redis-py: a path not a number selects no db
            db = int(unquote(parts.path).replace("/", ""))
    return RedisAddress(
        scheme="rediss" if scheme == "rediss" else "redis",
        host=unquote(parts.hostname) if parts.hostname else None,
        port=port or None,
        db=db,
        username=username,
        password=password,
        options=options,
    )
