"""The spool: durable appends, ordered exactly-once flushes, corrupt lines, the size cap, locks."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import Prompt, ToolCall, decode_event
from tests.support.ingest import closed_port_url, console_script, subprocess_env
from worker.ingest.prepare import PreparedEvent, prepare
from worker.ingest.producer import SyncProducer
from worker.ingest.spool import FLUSH_CHUNK, FlushResult, Spool
from worker.keys import Keys
from worker.settings import Settings

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _event(i: int, session: str = "s1") -> PreparedEvent:
    event = ToolCall(
        event_id=f"e{i}",
        memory_session_id=session,
        project="shop",
        occurred_at=NOW,
        tool_name="Bash",
        tool_input={"command": f"step {i}"},
    )
    return prepare(event, 16_384)


@pytest.fixture(name="settings")
def _fix_settings(redis_url: str, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, data_dir=str(tmp_path), prefix="t")


@pytest.fixture(name="producer")
def _fix_producer(settings: Settings, redis: aioredis.Redis) -> Iterator[SyncProducer]:
    with SyncProducer.connect(settings) as producer:
        yield producer


async def _stored_ids(redis: aioredis.Redis, session: str = "s1") -> list[str]:
    entries = await redis.xrange(Keys("t").events(session))
    return [decode_event(fields[b"event"]).event_id for _, fields in entries]


async def test_flush_publishes_in_order_once_and_empties_the_spool(
    settings: Settings, producer: SyncProducer, redis: aioredis.Redis
) -> None:
    spool = Spool.from_settings(settings)
    assert spool.append([_event(i) for i in range(5)]) == 5
    assert spool.append([_event(5), _event(6, session="s2")]) == 2
    assert spool.status().events == 7
    assert spool.flush(producer) == FlushResult(published=7)
    assert await _stored_ids(redis) == [f"e{i}" for i in range(6)]
    assert await _stored_ids(redis, "s2") == ["e6"]
    assert not spool.pending()
    assert spool.status().events == 0
    assert spool.flush(producer) == FlushResult()


async def test_a_flush_interrupted_after_publishing_repeats_without_duplicates(
    settings: Settings, producer: SyncProducer, redis: aioredis.Redis
) -> None:
    spool = Spool.from_settings(settings)
    spool.append([_event(i) for i in range(4)])
    producer.publish_many([_event(0), _event(1)])  # a crashed flush got this far
    result = spool.flush(producer)
    assert result == FlushResult(published=2, duplicates=2)
    assert await _stored_ids(redis) == ["e0", "e1", "e2", "e3"]


async def test_a_leftover_flushing_file_goes_first(
    settings: Settings, producer: SyncProducer, redis: aioredis.Redis
) -> None:
    spool = Spool.from_settings(settings)
    spool.append([_event(0), _event(1)])
    os.replace(spool.path, spool.flushing_path)  # a flush died after its rename
    spool.append([_event(2)])
    assert spool.flush(producer) == FlushResult(published=3)
    assert await _stored_ids(redis) == ["e0", "e1", "e2"]


async def test_a_corrupt_line_is_skipped_warned_about_and_kept_aside(
    settings: Settings,
    producer: SyncProducer,
    redis: aioredis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spool = Spool.from_settings(settings)
    spool.append([_event(0)])
    with spool.path.open("ab") as f:
        f.write(b'{"kind": "tool_call", "event_id": "half-writ\n')
        f.write(b"\x00\xff garbage\n")
    spool.append([_event(1)])
    assert spool.flush(producer) == FlushResult(published=2, rejected=2)
    assert await _stored_ids(redis) == ["e0", "e1"]
    assert spool.rejected_path.read_bytes() == (
        b'{"kind": "tool_call", "event_id": "half-writ\n\x00\xff garbage\n'
    )
    warnings = capsys.readouterr().err.splitlines()
    assert [w.split(" skipped")[0] for w in warnings] == [
        "memq: spool line 2",
        "memq: spool line 3",
    ]
    assert all(str(spool.rejected_path) in w for w in warnings)
    assert spool.status().rejected == 2


def test_a_full_spool_drops_the_event_counts_it_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line_size = len(_event(0).raw) + 1
    spool = Spool(tmp_path / "spool", max_bytes=line_size * 2 + 10)
    assert spool.append([_event(0), _event(1), _event(2)]) == 2
    assert spool.append([_event(3)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith(f"memq: spool {spool.path} is full ({spool.max_bytes} bytes)")
    assert "event e2 of session s1 dropped (1 dropped so far)" in err[0]
    assert "(2 dropped so far)" in err[1]
    status = spool.status()
    assert (status.events, status.dropped) == (2, 2)


async def test_backpressure_stops_the_flush_and_keeps_the_rest_in_order(
    settings: Settings, redis: aioredis.Redis
) -> None:
    tight = Settings(redis_url=settings.redis_url, data_dir=settings.data_dir, prefix="t",
                     max_pending_per_session=2)  # fmt: skip
    spool = Spool.from_settings(tight)
    spool.append([_event(i) for i in range(4)])
    with SyncProducer.connect(tight) as producer:
        result = spool.flush(producer)
        assert result is not None
        assert (result.published, result.remaining, result.stopped) == (2, 2, True)
        assert result.refused is not None
        assert "session s1" in result.refused
        await redis.delete(Keys("t").events("s1"))  # the workers caught up
        assert spool.flush(producer) == FlushResult(published=2)
    assert await _stored_ids(redis) == ["e2", "e3"]


async def test_a_deadline_stops_between_chunks_and_the_next_flush_finishes(
    settings: Settings, producer: SyncProducer, redis: aioredis.Redis
) -> None:
    spool = Spool.from_settings(settings)
    total = FLUSH_CHUNK + 50
    spool.append([_event(i) for i in range(total)])
    first = spool.flush(producer, deadline=time.monotonic() - 1)
    assert first is not None
    assert (first.published, first.remaining) == (FLUSH_CHUNK, 50)
    assert spool.flush(producer) == FlushResult(published=50)
    assert await _stored_ids(redis) == [f"e{i}" for i in range(total)]


async def test_only_one_process_flushes_at_a_time(
    settings: Settings, producer: SyncProducer, redis: aioredis.Redis
) -> None:
    spool = Spool.from_settings(settings)
    spool.append([_event(0)])
    fd = os.open(spool.directory / "flush.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process is flushing
        assert spool.flush(producer) is None
        assert spool.append_then_flush([_event(1)], producer) is None
    finally:
        os.close(fd)
    assert spool.flush(producer) == FlushResult(published=2)
    assert await _stored_ids(redis) == ["e0", "e1"]


async def test_append_then_flush_queues_behind_older_events(
    settings: Settings, producer: SyncProducer, redis: aioredis.Redis
) -> None:
    spool = Spool.from_settings(settings)
    spool.append([_event(0), _event(1)])
    assert spool.append_then_flush([_event(2)], producer) == FlushResult(published=3)
    assert await _stored_ids(redis) == ["e0", "e1", "e2"]


def _memq(data_dir: Path, redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script(), "spool", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=subprocess_env(data_dir, redis_url, MEMQ_PREFIX="t"),
        check=False,
    )


async def test_memq_spool_status_and_flush(
    settings: Settings, redis_url: str, redis: aioredis.Redis
) -> None:
    data_dir = Path(settings.data_dir)
    Spool.from_settings(settings).append([_event(0), _event(1)])
    status = json.loads(_memq(data_dir, redis_url, "status", "--json").stdout)
    assert (status["events"], status["dropped"], status["rejected"]) == (2, 0, 0)
    assert _memq(data_dir, redis_url, "status").stdout.startswith("2 events (")
    flushed = _memq(data_dir, redis_url, "flush")
    assert (flushed.returncode, flushed.stdout) == (
        0,
        "published 2, duplicates 0, rejected 0, remaining 0\n",
    )
    assert await _stored_ids(redis) == ["e0", "e1"]
    assert _memq(data_dir, redis_url, "flush").stdout == "spool empty\n"


def test_memq_spool_flush_without_redis_fails_in_one_line(tmp_path: Path) -> None:
    Spool(tmp_path / "spool", 1 << 20).append([_event(0)])
    done = _memq(tmp_path, closed_port_url(), "flush")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("memq: cannot reach Redis at redis://127.0.0.1:")
    assert Spool(tmp_path / "spool", 1 << 20).status().events == 1


def test_prompts_survive_the_spool_unchanged(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    prompt = Prompt(event_id="p1", memory_session_id="s1", project="shop", occurred_at=NOW,
                    prompt_text="naïve café ☕\nline two", prompt_number=3)  # fmt: skip
    spool.append([prepare(prompt, 16_384)])
    assert decode_event(spool.path.read_bytes()) == prompt
