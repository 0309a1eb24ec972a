"""hiredis packs the asyncio clients' commands: byte for byte what redis-py's packer makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from tests.support.worker_harness import make_settings
from worker.connect.hiredis_packing import HiredisPacking, use_hiredis_packing
from worker.connect.redis_client import connect_redis
from worker.queue.arq_pool import connect_arq

COMMANDS: list[tuple[Any, ...]] = [
    ("PING",),
    ("SET", "key", "välue ✓", "EX", 60),
    ("SET", b"bin\x00key", b"\xff\x00" * 5000),  # over redis-py's 6,000-byte buffer cutoff
    ("ZADD", "queue", 1.5, "job", 0.1, "other", 1e20, "big"),
    ("XGROUP CREATE", "stream", "group", "0", "MKSTREAM"),  # a two-word command name
    (b"CLIENT KILL", "ID", 7),
    ("EVALSHA", "a" * 40, 2, "k1", "k2", *range(50), *(b"p" * 1500 for _ in range(8))),
    ("HINCRBY", "stats", "stored", -3),
]


def _packed_by_redis_py(*args: Any) -> bytes:
    return b"".join(Connection().pack_command(*args))


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: str(a[0]))
def test_hiredis_packs_each_command_as_redis_py_does(args: tuple[Any, ...]) -> None:
    assert b"".join(HiredisPacking().pack_command(*args)) == _packed_by_redis_py(*args)


@pytest.mark.parametrize("bad", [True, None, object()])
def test_an_unpackable_argument_is_a_data_error_as_in_redis_py(bad: object) -> None:
    with pytest.raises(DataError):
        Connection().pack_command("SET", "k", bad)
    with pytest.raises(DataError):
        HiredisPacking().pack_command("SET", "k", bad)


@pytest.mark.parametrize("base", [Connection, SSLConnection, UnixDomainSocketConnection])
def test_every_connection_kind_keeps_its_own_behaviour(base: type[Connection]) -> None:
    class Pool:
        connection_class: type = base

    pool: Any = Pool()
    use_hiredis_packing(pool)
    assert issubclass(pool.connection_class, base)
    assert issubclass(pool.connection_class, HiredisPacking)
    first = pool.connection_class
    use_hiredis_packing(pool)  # idempotent: no subclass of a subclass
    assert pool.connection_class is first


async def test_memq_clients_pack_with_hiredis_and_round_trip(
    tmp_path: Path, redis_url: str
) -> None:
    settings = make_settings(tmp_path, redis_url, "http://127.0.0.1:9")
    for client in (await connect_redis(settings), await connect_arq(settings)):
        try:
            assert issubclass(client.connection_pool.connection_class, HiredisPacking)
            big = bytes(range(256)) * 100
            pipe = client.pipeline(transaction=False)
            pipe.set("packing:big", big)
            pipe.get("packing:big")
            pipe.eval("return {ARGV[1], ARGV[2], #ARGV}", 0, "välue", 2.5, *range(20))
            _, got, script = await pipe.execute()
            assert got == big
            assert script == ["välue".encode(), b"2.5", 22]
        finally:
            await client.aclose()
