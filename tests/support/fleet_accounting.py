"""The accounting after a fleet run: every published call stored once, dropped or dead-lettered.

Read back from the shared PostgreSQL database (processed events, dropped replies,
observations), Redis's dead-letter stream and, when the fleet has one, the Chroma server;
nothing here trusts the workers' own counters.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
from redis.asyncio import Redis

from tests.support.fleet_load import Published
from worker.keys import Keys
from worker.search.vector_index import collection_name

_STEP = re.compile(r"step-(\d{4})")
HASH_EMBEDDING_NAME = "memq-test-hash"  # tests.support.embeddings.HashEmbeddingFunction.name()


class FleetReport(msgspec.Struct, kw_only=True):
    """What happened to the calls one load run published. `published = stored + dropped + dead`
    holds when `lost`, `double_counted` and `unexpected` are 0."""

    published: int
    stored: int  # processed and not dropped: each has its observation
    dropped: int  # processed, the observer's reply recorded as dropped with its category
    dead: int  # dead-lettered
    lost: list[str]  # published, neither processed nor dead-lettered
    double_counted: list[str]  # both processed and dead-lettered
    unexpected: list[str]  # processed ids nobody published (another run's, or invented)
    duplicated: int  # observations beyond the first for one (session, title)
    stored_without_observation: int  # stored calls no observation names as its source
    order_problems: list[str]  # sessions whose observations were committed out of step order
    observer_order_problems: list[str]  # calls that showed a session's steps out of order
    missing_vectors: int | None  # observations without their title vector; None: Chroma off
    latency_p50_ms: float | None  # hook exit -> processed_at, over stored and dropped calls
    latency_p99_ms: float | None
    hook_failures: int  # hooks that did not exit 0 (their calls are not in `published`)
    hook_p50_ms: float | None  # the hook process's own time, as the agent waits for it
    worker_cpu_s: dict[str, float]  # per worker slot from the load's start (restarts included)
    worker_starts: dict[str, int]
    redis_cpu_s: float | None  # Redis server CPU over the run; None when it cannot be told
    redis_cpu_ms_per_event: float | None  # Redis CPU over the run (polling too) / published
    spool_flushes: int = 0  # `memq spool flush` runs settling needed (no hook came to do it)
    vector_outbox_pending: int = 0  # outbox rows not marked indexed when the report was read

    def balanced(self) -> bool:
        """Every published call accounted for exactly once, nothing duplicated or out of order."""
        return (
            not self.lost
            and not self.double_counted
            and not self.unexpected
            and self.duplicated == 0
            and self.stored_without_observation == 0
            and not self.order_problems
            and not self.observer_order_problems
            and self.missing_vectors in (0, None)
            and self.stored + self.dropped + self.dead == self.published
        )

    def line(self) -> str:
        """One line for a test's output."""
        return (
            f"published {self.published} = stored {self.stored} + dropped {self.dropped}"
            f" + dead {self.dead}; lost {len(self.lost)}, double-counted"
            f" {len(self.double_counted)}, duplicated {self.duplicated}, order problems"
            f" {len(self.order_problems)} committed + {len(self.observer_order_problems)} asked,"
            f" missing vectors {self.missing_vectors};"
            f" publish->stored p50 {_ms(self.latency_p50_ms)} p99 {_ms(self.latency_p99_ms)};"
            f" hook p50 {_ms(self.hook_p50_ms)}, failures {self.hook_failures};"
            f" worker CPU {self.worker_cpu_s} s, starts {self.worker_starts};"
            f" Redis CPU/event {_ms(self.redis_cpu_ms_per_event)}; spool flushes"
            f" {self.spool_flushes}; outbox rows pending {self.vector_outbox_pending}"
        )


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by the inclusive method; None for no values."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


class StoreView(msgspec.Struct, kw_only=True):
    """The rows of the run's sessions, as the shared database holds them."""

    processed_at: dict[str, float]  # event id -> epoch seconds
    dropped: set[str]
    observations: list[tuple[int, str, str, list[str]]]  # (id, session, title, source ids)


async def read_store(database_url: str, sessions: list[str]) -> StoreView:
    """Read the processed events, dropped replies and observations of `sessions`."""
    conn = await asyncpg.connect(database_url)
    try:
        processed = await conn.fetch(
            "SELECT event_id, processed_at FROM processed_events WHERE memory_session_id = ANY($1)",
            sessions,
        )
        dropped = await conn.fetch(
            "SELECT event_ids FROM dropped_outputs WHERE memory_session_id = ANY($1)", sessions
        )
        observed = await conn.fetch(
            "SELECT id, memory_session_id, coalesce(title, '') AS title, source_event_ids"
            " FROM observations WHERE memory_session_id = ANY($1) ORDER BY id",
            sessions,
        )
    finally:
        await conn.close()
    return StoreView(
        processed_at={
            r["event_id"]: datetime.fromisoformat(r["processed_at"]).timestamp() for r in processed
        },
        dropped={e for r in dropped for e in _json_list(r["event_ids"])},
        observations=[
            (int(r["id"]), r["memory_session_id"], r["title"], _json_list(r["source_event_ids"]))
            for r in observed
        ],
    )


async def processed_so_far(
    database_url: str, ids: list[str], sessions: list[str]
) -> tuple[int, list[int]]:
    """(how many of `ids` are processed, the ids of `sessions`' observations)."""
    conn = await asyncpg.connect(database_url)
    try:
        processed = await conn.fetchval(
            "SELECT count(*) FROM processed_events WHERE event_id = ANY($1)", ids
        )
        observed = await conn.fetch(
            "SELECT id FROM observations WHERE memory_session_id = ANY($1)", sessions
        )
    finally:
        await conn.close()
    return int(processed), [int(r["id"]) for r in observed]


async def vector_outbox_pending(database_url: str) -> int:
    """Outbox rows not yet marked indexed (in the whole database)."""
    conn = await asyncpg.connect(database_url)
    try:
        pending = await conn.fetchval("SELECT count(*) FROM vector_outbox WHERE state = 'pending'")
        return int(pending)
    finally:
        await conn.close()


def _json_list(value: Any) -> list[str]:
    # asyncpg hands JSONB over as its text unless a codec is set.
    loaded = json.loads(value) if isinstance(value, str) else value
    return [str(v) for v in loaded]


async def dead_event_ids(redis: Redis, prefix: str) -> set[str]:
    """Event ids in the dead-letter stream (an entry without a decodable event is skipped)."""
    ids: set[str] = set()
    for _, fields in await redis.xrange(Keys(prefix).dead):
        try:
            ids.add(str(json.loads(fields[b"event"])["event_id"]))
        except (KeyError, ValueError, TypeError):
            continue
    return ids


def missing_vectors(chroma: str, prefix: str, observation_ids: list[int]) -> int:
    """Observations whose title document is not in the Chroma server's collection."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    parts = urlsplit(chroma)
    client = chromadb.HttpClient(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 8000,
        settings=ChromaSettings(anonymized_telemetry=False),
    )
    wanted = [f"obs_{i}_title" for i in observation_ids]
    if not wanted:
        return 0
    collection = client.get_collection(collection_name(prefix, HASH_EMBEDDING_NAME))
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        found.update(collection.get(ids=wanted[start : start + 500], include=[])["ids"])
    return len(set(wanted) - found)


def order_problems(observations: list[tuple[int, str, str, list[str]]]) -> list[str]:
    """Sessions whose observations, in commit (id) order, do not follow their steps."""
    steps: dict[str, list[int]] = defaultdict(list)
    for _, session, title, _sources in observations:
        match = _STEP.search(title)
        if match is not None:
            steps[session].append(int(match[1]))
    return [f"{s}: {found}" for s, found in steps.items() if found != sorted(found)]


def account(
    published: list[Published],
    store: StoreView,
    dead: set[str],
    *,
    missing: int | None,
    hook_failures: int,
    worker_cpu_s: dict[str, float],
    worker_starts: dict[str, int],
    redis_cpu_s: float | None,
    spool_flushes: int = 0,
    observer_order_problems: list[str] | None = None,
    vector_outbox_pending: int = 0,
) -> FleetReport:
    """Balance what was published against what the store and the dead-letter stream hold."""
    ids = {p.event_id for p in published}
    processed = set(store.processed_at)
    titles = Counter((session, title) for _, session, title, _ in store.observations)
    sourced = {e for *_, sources in store.observations for e in sources}
    stored = (processed & ids) - store.dropped
    latencies = [
        (store.processed_at[p.event_id] - p.published_at) * 1000
        for p in published
        if p.event_id in processed
    ]
    hooks = [p.hook_s * 1000 for p in published]
    return FleetReport(
        published=len(ids),
        stored=len(stored),
        dropped=len((processed & ids) & store.dropped),
        dead=len(dead & (ids - processed)),
        lost=sorted(ids - processed - dead),
        double_counted=sorted(ids & processed & dead),
        unexpected=sorted(processed - ids),
        duplicated=sum(n - 1 for n in titles.values()),
        stored_without_observation=len(stored - sourced),
        order_problems=order_problems(store.observations),
        observer_order_problems=observer_order_problems or [],
        missing_vectors=missing,
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        hook_failures=hook_failures,
        hook_p50_ms=percentile(hooks, 50),
        worker_cpu_s={k: round(v, 2) for k, v in worker_cpu_s.items()},
        worker_starts=worker_starts,
        redis_cpu_s=redis_cpu_s,
        redis_cpu_ms_per_event=None
        if redis_cpu_s is None or not ids
        else redis_cpu_s * 1000 / len(ids),
        spool_flushes=spool_flushes,
        vector_outbox_pending=vector_outbox_pending,
    )
