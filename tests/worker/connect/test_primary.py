"""Which primary a process reaches: failovers noted once per Sentinel set-up, addresses shown."""

from __future__ import annotations

import logging
import uuid

import pytest
from redis.asyncio import Redis

from worker.connect.primary import connected_primary, format_address, note_primary, primary_state


def _sentinels() -> list[str]:
    # A set-up of its own: the state is process-wide and other tests note theirs.
    tag = uuid.uuid4().hex[:8]
    return [f"s1-{tag}:26379", f"s2-{tag}:26379"]


def test_a_changed_master_is_one_failover_and_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="worker.connect.primary")
    sentinels = _sentinels()
    before = primary_state().failovers
    note_primary("mymaster", sentinels, ("10.0.0.1", 6379))
    note_primary("mymaster", sentinels, ("10.0.0.1", 6379))
    # Another client of the same process asks the same sentinels, in another order.
    note_primary("mymaster", list(reversed(sentinels)), ("10.0.0.1", 6379))
    assert primary_state().failovers == before
    note_primary("mymaster", sentinels, ("10.0.0.2", 6379))
    note_primary("mymaster", list(reversed(sentinels)), ("10.0.0.2", 6379))
    state = primary_state()
    assert state.failovers == before + 1
    assert state.addresses[f"mymaster@{','.join(sorted(sentinels))}"] == "10.0.0.2:6379"
    assert [r.getMessage() for r in caplog.records] == [
        "Redis primary of 'mymaster' is now 10.0.0.2:6379 (was 10.0.0.1:6379):"
        " a Sentinel failover; following it"
    ]


def test_another_master_or_sentinel_set_is_not_a_failover() -> None:
    sentinels = _sentinels()
    before = primary_state().failovers
    note_primary("one", sentinels, ("10.0.0.1", 6379))
    note_primary("two", sentinels, ("10.0.0.9", 6379))
    note_primary("one", _sentinels(), ("10.0.0.7", 6379))
    assert primary_state().failovers == before


async def test_a_plain_client_names_its_urls_address() -> None:
    tcp = Redis.from_url("redis://:secret@127.0.0.1:6390/2")
    unix = Redis.from_url("unix:///run/memq/redis.sock")
    try:
        assert connected_primary(tcp) == "127.0.0.1:6390"  # no password
        assert connected_primary(unix) == "unix:/run/memq/redis.sock"
    finally:
        await tcp.aclose()
        await unix.aclose()


def test_ipv6_hosts_are_bracketed() -> None:
    assert format_address(("::1", 26379)) == "[::1]:26379"
    assert format_address(("redis.internal", 6379)) == "redis.internal:6379"
