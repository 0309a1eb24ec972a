"""Publishing events: scrub and cap each event, then XADD + schedule it in one Lua call.

`Producer` is asyncio on redis-py (scripts, `memq publish`, services); `SyncProducer` is a
blocking one on the hook's small RESP client (`worker.ingest.sync_redis`), for scripts and the
Claude Code hook, which cannot afford redis-py's import. Both run the publish script with the
KEYS and ARGV `worker.queue.scheduling.publish_args` makes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from pipeline.events import Event, ToolCall
from worker.connect.managed_redis import DEFAULT_START_TIMEOUT_S
from worker.errors import BackpressureError, RedisUnavailableError
from worker.ingest.prepare import PreparedEvent, prepare
from worker.ingest.sync_redis import SyncRedis, connect_sync
from worker.keys import Keys
from worker.queue.scheduling import PUBLISH_LUA, Scheduler, publish_args
from worker.redis_text import as_text
from worker.settings import Settings

if TYPE_CHECKING:
    from redis.asyncio import Redis

CHUNK_SIZE = 500
DEDUPE_WINDOW_S = 7 * 24 * 3600
"""How long a published event id is remembered: a re-send within it stores nothing; as long as
the replay guard keeps processed ids (PROCESSED_RETENTION)."""
PUBLISH_WAIT_TIMEOUT_MS = 1000
"""The longest a publish waits for MEMQ_PUBLISH_WAIT_REPLICAS replicas (Redis WAIT): past it,
a replica that far behind would lose the events in a failover anyway (docs/fleet.md)."""
_PUBLISH_SHA = hashlib.sha1(PUBLISH_LUA.encode()).hexdigest()


def prepare_event(event: Event, settings: Settings) -> PreparedEvent:
    """The event as it may leave the producer: private parts stripped, secrets redacted, capped."""
    return prepare(event, settings.max_event_bytes)


class PublishResult(msgspec.Struct, frozen=True, kw_only=True):
    """What happened to one published event."""

    event_id: str
    memory_session_id: str
    status: Literal["added", "duplicate", "refused"]
    stream_id: str = ""
    """The entry's id; for a duplicate, the id of the copy stored first."""


class PublishNotReplicatedError(RedisUnavailableError):
    """Redis took the events but too few replicas hold them yet: not counted as published."""


def wait_timeout_ms(client_timeout_ms: int | None) -> int:
    """How long a publish's WAIT may take: half the client's own timeout at most, so that its
    answer is read (the other half is slack for a loaded machine), not cut off as Redis not
    answering."""
    if not client_timeout_ms:
        return PUBLISH_WAIT_TIMEOUT_MS
    return max(1, min(PUBLISH_WAIT_TIMEOUT_MS, client_timeout_ms // 2))


def replication_message(events: int, replicas: int, wanted: int, timeout_ms: int) -> str:
    """The one-line reason given when WAIT saw fewer replicas than MEMQ_PUBLISH_WAIT_REPLICAS."""
    return (
        f"{events} event(s) reached {replicas} of MEMQ_PUBLISH_WAIT_REPLICAS={wanted} replicas "
        f"within {timeout_ms} ms: not counted as published (sending them again is safe: "
        "event ids dedupe)"
    )


class PublishRefusedError(BackpressureError):
    """Some events of a batch were refused by backpressure; `results` tells which landed."""

    def __init__(self, message: str, results: list[PublishResult]) -> None:
        super().__init__(message)
        self.results = results


def backpressure_message(session: str, limit: int) -> str:
    """The one-line reason given when a session's stream is full."""
    return (
        f"session {session} already holds {limit} unprocessed events "
        f"(MEMQ_MAX_PENDING_PER_SESSION={limit}): publishing refused until the workers catch up"
    )


class Producer:
    """Publishes events from asyncio code (redis-py, pipelined batches)."""

    def __init__(self, redis: Redis, settings: Settings, timeout_ms: int | None = None) -> None:
        self.redis = redis
        self.settings = settings
        self._timeout_ms = timeout_ms  # the client's, which a WAIT must stay within
        self._keys = Keys(settings.prefix)
        self._scheduler = Scheduler(redis, self._keys)

    @classmethod
    async def connect(cls, settings: Settings, *, timeout_ms: int | None = None) -> Producer:
        """A producer on MEMQ_REDIS_URL or the managed Redis."""
        from worker.connect.redis_client import connect_redis

        return cls(await connect_redis(settings, timeout_ms=timeout_ms), settings, timeout_ms)

    async def aclose(self) -> None:
        """Close the Redis client."""
        await self.redis.aclose()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def publish(self, event: PreparedEvent) -> PublishResult:
        """Publish one event; BackpressureError when its session's stream is full."""
        return (await self.publish_many([event]))[0]

    async def publish_many(self, events: Iterable[PreparedEvent]) -> list[PublishResult]:
        """Publish events in order, pipelined; PublishRefusedError if any was refused."""
        from redis.exceptions import RedisError

        results: list[PublishResult] = []
        script = self._scheduler.publish_script
        wanted = self.settings.publish_wait_replicas
        wait_ms = wait_timeout_ms(self._timeout_ms)
        for chunk in _chunks(events):
            pipe = self.redis.pipeline(transaction=False)
            for prepared in chunk:
                keys, args = event_publish_args(
                    self._keys, self.settings, prepared.event, prepared.raw
                )
                await script(keys=keys, args=args, client=pipe)
            if wanted:
                pipe.execute_command("WAIT", wanted, wait_ms)
            try:
                # Error replies come back as values: raised, redis-py's message would quote
                # every command of the pipeline, each event's JSON with it.
                replies = await pipe.execute(raise_on_error=False)
            except (RedisError, OSError) as e:
                raise RedisUnavailableError(f"publish failed: {e}") from e
            if failed := next((r for r in replies if isinstance(r, Exception)), None):
                raise RedisUnavailableError(f"publish failed: {type(failed).__name__}: {failed}")
            if wanted:
                _check_replicas(replies.pop(), len(chunk), wanted, wait_ms)
            results.extend(_result(p.event, *r) for p, r in zip(chunk, replies, strict=True))
        _raise_if_refused(results, self.settings)
        return results


class SyncProducer:
    """Publishes events from blocking code, over the hook's small RESP connection."""

    def __init__(self, client: SyncRedis, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self._keys = Keys(settings.prefix)
        self._script_loaded = False

    @classmethod
    def connect(
        cls,
        settings: Settings,
        *,
        timeout_ms: int = 5000,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> SyncProducer:
        """A producer on MEMQ_REDIS_URL or the managed Redis (started on demand)."""
        return cls(
            connect_sync(settings, timeout_ms=timeout_ms, start_timeout_s=start_timeout_s),
            settings,
        )

    def close(self) -> None:
        """Close the connection."""
        self.client.close()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def publish(self, event: PreparedEvent) -> PublishResult:
        """Publish one event; BackpressureError when its session's stream is full."""
        return self.publish_many([event])[0]

    def unseen(self, events: Sequence[Event]) -> list[Event]:
        """The events whose id was not published within DEDUPE_WINDOW_S (one round trip)."""
        if not events:
            return []
        seen = self.client.execute("MGET", *(self._keys.seen(e.event_id) for e in events))
        return [e for e, known in zip(events, seen, strict=True) if known is None]

    def publish_many(self, events: Iterable[PreparedEvent]) -> list[PublishResult]:
        """Publish events in order, pipelined; PublishRefusedError if any was refused."""
        results: list[PublishResult] = []
        wanted = self.settings.publish_wait_replicas
        wait_ms = wait_timeout_ms(self.client.timeout_ms)
        for chunk in _chunks(events):
            commands: list[list[Any]] = []
            if not self._script_loaded:
                commands.append(["SCRIPT", "LOAD", PUBLISH_LUA])
            commands.extend(self._command(p) for p in chunk)
            if wanted:
                commands.append(["WAIT", wanted, wait_ms])
            replies = self.client.pipeline(commands)
            if not self._script_loaded:
                _check_reply(replies.pop(0), self.client.where)
                self._script_loaded = True
            if wanted:
                waited = replies.pop()
                _check_reply(waited, self.client.where)
                _check_replicas(waited, len(chunk), wanted, wait_ms)
            for prepared, reply in zip(chunk, replies, strict=True):
                _check_reply(reply, self.client.where)
                results.append(_result(prepared.event, *reply))
        _raise_if_refused(results, self.settings)
        return results

    def _command(self, prepared: PreparedEvent) -> list[Any]:
        keys, args = event_publish_args(self._keys, self.settings, prepared.event, prepared.raw)
        return ["EVALSHA", _PUBLISH_SHA, len(keys), *keys, *args]


def event_publish_args(
    keys: Keys, s: Settings, event: Event, raw: bytes
) -> tuple[list[str], list[Any]]:
    """The publish script's KEYS and ARGV for one prepared event under these settings."""
    # Anything but a tool call (a prompt, summary request, end) makes a waiting turn due.
    return publish_args(
        keys, event.memory_session_id, event.event_id, raw,
        dedupe_ttl_s=DEDUPE_WINDOW_S, max_pending=s.max_pending_per_session,
        due_now=not isinstance(event, ToolCall), full_at=s.batch_max_events,
    )  # fmt: skip


def _chunks(events: Iterable[PreparedEvent]) -> Iterable[list[PreparedEvent]]:
    chunk: list[PreparedEvent] = []
    for event in events:
        chunk.append(event)
        if len(chunk) >= CHUNK_SIZE:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _result(event: Event, status: int | bytes, stream_id: bytes | str) -> PublishResult:
    code = int(status)
    sid = as_text(stream_id)
    return PublishResult(
        event_id=event.event_id,
        memory_session_id=event.memory_session_id,
        status="added" if code == 1 else "duplicate" if code == 0 else "refused",
        stream_id=sid,
    )


def _check_reply(reply: Any, where: str) -> None:
    if isinstance(reply, Exception):
        raise RedisUnavailableError(f"Redis at {where} failed the publish: {reply}")


def _check_replicas(reply: Any, events: int, wanted: int, timeout_ms: int) -> None:
    replicas = int(reply)
    if replicas < wanted:
        raise PublishNotReplicatedError(replication_message(events, replicas, wanted, timeout_ms))


def _raise_if_refused(results: Sequence[PublishResult], settings: Settings) -> None:
    refused = next((r for r in results if r.status == "refused"), None)
    if refused is not None:
        limit = settings.max_pending_per_session
        raise PublishRefusedError(
            backpressure_message(refused.memory_session_id, limit), list(results)
        )
