"""Which Redis primary this process talks to, and the failovers it has seen.

A Sentinel client asks the sentinels for the master before it connects; when the answer
changes (a failover), `note_primary` logs one line for the whole process and counts it, so an
operator sees the failover once instead of a traceback per event. `memq stats` and
`/metrics` name the primary from here.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from redis.asyncio import Redis

logger = logging.getLogger(__name__)


class PrimaryState(msgspec.Struct, frozen=True, kw_only=True):
    """The primaries last named by the sentinels in this process, and the failovers seen."""

    addresses: dict[str, str]
    """`<master name>@<sentinels>` -> the master's host:port."""
    failovers: int


_lock = threading.Lock()
_addresses: dict[str, str] = {}
_failovers = 0


def note_primary(master: str, sentinels: list[str], address: tuple[str, int]) -> None:
    """Record the master the sentinels named; one warning line when it changed.

    Keyed by the master's name and the sentinels asked: every client of a process on the same
    Sentinel set-up (arq's pool, memq's own) shares one entry, so a failover is said once.
    """
    global _failovers
    key = f"{master}@{','.join(sorted(sentinels))}"
    shown = format_address(address)
    with _lock:
        previous = _addresses.get(key)
        if previous == shown:
            return
        _addresses[key] = shown
        if previous is None:
            return
        _failovers += 1
    logger.warning(
        "Redis primary of %r is now %s (was %s): a Sentinel failover; following it",
        master,
        shown,
        previous,
    )


def primary_state() -> PrimaryState:
    """What `note_primary` recorded in this process."""
    with _lock:
        return PrimaryState(addresses=dict(_addresses), failovers=_failovers)


def connected_primary(redis: Redis) -> str:
    """host:port (or the socket path) of the primary `redis` reaches; no credentials.

    A Sentinel client's pool knows the master it last connected to; any other client's pool
    holds the address of its URL.
    """
    pool = redis.connection_pool
    master = getattr(pool, "master_address", None)
    if master:
        return format_address(master)
    kwargs = pool.connection_kwargs
    if kwargs.get("path"):
        return f"unix:{kwargs['path']}"
    return format_address((str(kwargs.get("host", "localhost")), int(kwargs.get("port", 6379))))


def format_address(address: tuple[str, int]) -> str:
    """host:port, IPv6 hosts in brackets."""
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
