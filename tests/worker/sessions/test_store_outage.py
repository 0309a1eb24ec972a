"""A session's job while its PostgreSQL is down: the entries stay pending and no attempt is
counted, however many times it tries; once the server is back the turn commits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver
from tests.support.postgres_server import PostgresServer
from tests.support.worker_checks import dead_letters, outcomes, unacked
from tests.support.worker_harness import drain, make_settings, publish, running_runtime, tool_call
from worker.keys import Keys
from worker.storage.postgres.store import PostgresStore


@pytest.fixture(name="own_postgres")
def _fix_own_postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()  # its own: it is stopped mid-test
    yield server
    server.stop()


async def test_jobs_wait_for_an_unreachable_store_without_counting_attempts(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    own_postgres: PostgresServer,
) -> None:
    url = await own_postgres.create_database()
    # Two attempts would dead-letter a turn whose storage fails; the outage outlasts many.
    settings = make_settings(
        tmp_path, redis_url, fake_observer.url, database_url=url, max_attempts="2"
    )
    calls = [tool_call("down", n) for n in range(3)]
    async with running_runtime(settings, arq_redis) as rt:
        await rt.store.ping()  # migrated while the server is up
        await asyncio.to_thread(own_postgres.halt)
        await publish(arq_redis, settings, *calls)
        with pytest.raises(TimeoutError):  # the session keeps coming back while it is down
            await drain(rt, arq_redis, timeout_s=2)
        attempts = await arq_redis.hgetall(Keys(settings.prefix).attempts("down"))
        pending = await unacked(arq_redis, settings, "down")
        waits = (
            None
            if rt.metrics is None
            else rt.metrics.registry.get_sample_value("memq_store_waits_total")
        )
        await asyncio.to_thread(own_postgres.resume)
        await drain(rt, arq_redis, timeout_s=30)
    store = PostgresStore(url)
    try:
        stored = await store.observations(memory_session_id="down")
    finally:
        await store.aclose()
    # Only the job-error backoff's own field: no turn was charged an attempt.
    assert set(attempts) <= {b"job-errors"}
    assert pending[0] == 3  # every entry still in its stream, none acked or dead-lettered
    assert await dead_letters(arq_redis, settings) == []
    counted = await outcomes(arq_redis, settings)
    assert (counted.get("retry", 0), counted.get("dead", 0), counted.get("stored")) == (0, 0, 3)
    assert len(stored) == 3
    if waits is not None:  # a runtime with metrics counted each wait
        assert waits >= 2
