"""The fan-out consumer: exactly once across restarts and Redis blips, pub/sub latency, gaps."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from tests.support.feed_rows import announce, fake_row
from worker.backoff import Backoff
from worker.fanout.feed import FanoutConsumer
from worker.fanout.feed_items import FeedItem
from worker.keys import Keys
from worker.storage.sqlite.store import SqliteStore

KEYS = Keys("fan")
CLIENT_NAME = "fanout-under-test"


@pytest.fixture(name="consumer_redis")
async def _fix_consumer_redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """The consumer's own client, named so a test can cut its connections."""
    client = aioredis.Redis.from_url(redis_url, client_name=CLIENT_NAME)
    yield client
    await client.aclose()


async def _kill_consumer_connections(redis: aioredis.Redis) -> None:
    for client in await redis.client_list():
        if client.get("name") == CLIENT_NAME:
            await redis.client_kill_filter(_id=client["id"])


async def _until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"condition still false after {timeout_s}s")


def _recorder(delivered: list[str], rng: random.Random) -> Callable[[FeedItem], Awaitable[None]]:
    async def handler(item: FeedItem) -> None:
        # The effect is one synchronous append after the last await: done or not, never half.
        await asyncio.sleep(rng.choice((0, 0, 0.001)))
        delivered.append(item.key)

    return handler


async def test_burst_of_500_with_kills_restarts_and_blips_is_delivered_exactly_once(
    redis: aioredis.Redis, consumer_redis: aioredis.Redis, store: SqliteStore
) -> None:
    rng = random.Random(6)
    rows = [fake_row(n) for n in range(1, 501)]
    delivered: list[str] = []
    handler = _recorder(delivered, rng)

    def consumer() -> FanoutConsumer:
        return FanoutConsumer(
            consumer_redis,
            KEYS,
            handler,
            name="burst",
            start="beginning",
            backoff=Backoff(base_s=0.01, max_s=30.0, jitter=False),
        )

    async def produce() -> None:
        for i in range(0, len(rows), 10):
            await announce(redis, KEYS, store, rows[i : i + 10])
            if i % 50 == 0:  # a worker re-announcing rows after a crash: same rows, new entries
                await announce(redis, KEYS, store, rows[max(0, i - 15) : i])
            await asyncio.sleep(0.002)

    producer = asyncio.create_task(produce())
    kills = 0
    # At least five kills, and a blip every third round besides the random ones: how many
    # rounds the burst lasts depends on the machine, the faults must not.
    while not producer.done() or kills < 5:
        current = consumer()
        task = asyncio.create_task(current.run())
        await asyncio.sleep(rng.uniform(0.005, 0.04))
        if kills % 3 == 1 or rng.random() < 0.3:
            await _kill_consumer_connections(redis)
            await asyncio.sleep(rng.uniform(0.005, 0.02))
        task.cancel()  # a kill: the task dies wherever it is
        await asyncio.gather(task, return_exceptions=True)
        kills += 1
    await producer
    last = consumer()
    task = asyncio.create_task(last.run())
    await _until(lambda: len(set(delivered)) == len(rows))
    await asyncio.sleep(0.2)  # time for a wrongly repeated row to show up
    last.stop()
    await task

    repeated = {key: n for key, n in Counter(delivered).items() if n > 1}
    assert repeated == {}
    assert delivered == [f"observation:{n}" for n in range(1, 501)]
    assert last.stats.duplicates > 0  # the re-announced rows were seen and skipped


async def test_pub_sub_wakes_the_consumer_long_before_its_poll_interval(
    redis: aioredis.Redis, store: SqliteStore
) -> None:
    got: list[FeedItem] = []

    async def handler(item: FeedItem) -> None:
        got.append(item)

    live = FanoutConsumer(redis, KEYS, handler, name=None, poll_interval_s=30)
    task = asyncio.create_task(live.run())
    await live.wait_ready()
    await asyncio.sleep(0.05)  # let it subscribe and go idle
    loop = asyncio.get_running_loop()
    sent_at = loop.time()
    await announce(redis, KEYS, store, [fake_row(1, title="<b>fresh</b>")])
    await _until(lambda: bool(got), timeout_s=2)
    latency = loop.time() - sent_at
    live.stop()
    await task
    assert latency < 0.5
    assert got[0].row.title == "<b>fresh</b>"
    assert got[0].feed_id == live.cursor


async def test_a_new_named_consumer_starts_at_the_end_and_keeps_its_place(
    redis: aioredis.Redis, store: SqliteStore
) -> None:
    await announce(redis, KEYS, store, [fake_row(1), fake_row(2)])
    delivered: list[str] = []
    handler = _recorder(delivered, random.Random(1))
    first = FanoutConsumer(redis, KEYS, handler, name="late", poll_interval_s=0.05)
    task = asyncio.create_task(first.run())
    await first.wait_ready()
    first.stop()
    await task
    # Announced while no consumer runs: the next start must pick them up.
    await announce(redis, KEYS, store, [fake_row(3), fake_row(4)])
    second = FanoutConsumer(redis, KEYS, handler, name="late", poll_interval_s=0.05)
    task = asyncio.create_task(second.run())
    await _until(lambda: len(delivered) == 2)
    second.stop()
    await task
    assert delivered == ["observation:3", "observation:4"]
    assert second.stats.gaps == 0


@pytest.mark.parametrize(
    ("failures", "expected_delivered", "expected_failed"),
    [(0, ["observation:1", "observation:2"], 0), (2, ["observation:1", "observation:2"], 0),
     (99, ["observation:2"], 1)],
)  # fmt: skip
async def test_a_failing_handler_is_retried_then_counted_and_passed(
    redis: aioredis.Redis,
    store: SqliteStore,
    failures: int,
    expected_delivered: list[str],
    expected_failed: int,
) -> None:
    attempts: Counter[str] = Counter()
    delivered: list[str] = []

    async def handler(item: FeedItem) -> None:
        attempts[item.key] += 1
        if item.row.id == 1 and attempts[item.key] <= failures:
            raise RuntimeError("chat unreachable")
        delivered.append(item.key)

    consumer = FanoutConsumer(
        redis,
        KEYS,
        handler,
        name="flaky",
        start="beginning",
        max_attempts=3,
        backoff=Backoff(base_s=0.01, max_s=30.0, jitter=False),
    )
    await announce(redis, KEYS, store, [fake_row(1), fake_row(2)])
    task = asyncio.create_task(consumer.run())
    await _until(lambda: "observation:2" in delivered)
    consumer.stop()
    await task
    assert delivered == expected_delivered
    assert consumer.stats.failed == expected_failed
    counted = await redis.hgetall(KEYS.fanout_stats("flaky"))
    assert int(counted.get(b"failed", 0)) == expected_failed


async def test_a_malformed_feed_entry_is_counted_and_skipped(
    redis: aioredis.Redis, store: SqliteStore
) -> None:
    await redis.xadd(KEYS.feed, {"payload": b"{not json", "kind": "observation", "id": "9"})
    await announce(redis, KEYS, store, [fake_row(1)])
    delivered: list[str] = []
    consumer = FanoutConsumer(
        redis, KEYS, _recorder(delivered, random.Random(2)), name="m", start="beginning"
    )
    task = asyncio.create_task(consumer.run())
    await _until(lambda: bool(delivered))
    consumer.stop()
    await task
    assert delivered == ["observation:1"]
    assert consumer.stats.malformed == 1


async def test_a_feed_trimmed_past_the_cursor_is_reported_as_a_gap(
    redis: aioredis.Redis, store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    delivered: list[str] = []
    handler = _recorder(delivered, random.Random(3))
    first = FanoutConsumer(redis, KEYS, handler, name="slow", start="beginning")
    task = asyncio.create_task(first.run())
    await announce(redis, KEYS, store, [fake_row(1)])
    await _until(lambda: bool(delivered))
    first.stop()
    await task
    await announce(redis, KEYS, store, [fake_row(n) for n in range(2, 6)])
    await redis.xtrim(KEYS.feed, maxlen=2, approximate=False)  # rows 2 and 3 are gone
    second = FanoutConsumer(redis, KEYS, handler, name="slow")
    task = asyncio.create_task(second.run())
    await _until(lambda: len(delivered) == 3)
    second.stop()
    await task
    assert delivered == ["observation:1", "observation:4", "observation:5"]
    assert second.stats.gaps == 1
    assert any("trimmed past" in r.getMessage() for r in caplog.records)
