"""Silent sessions: tool calls kept coming, yet no observation was stored for a long while.

A session is silent, for a threshold S, when either
- its observer has answered tool calls (its conversation in Redis has history), its activity
  went on for at least S after its newest stored observation (or its start, when it has
  none), and that activity is no older than S: the alert clears S after the session stops;
- or its stream holds a tool call published at least S ago with no observation stored since:
  unprocessed work is silent for as long as it waits.
"""

from __future__ import annotations

from datetime import datetime

import msgspec
from redis.asyncio import Redis

from worker.keys import Keys
from worker.redis_text import as_text
from worker.sessions.observer_state import StateStore
from worker.storage.protocol import ReadStore

SESSIONS_SCANNED = 1000
"""Store sessions read per scrape, newest activity first (older ones cannot be silent now)."""
NEWEST_ROWS_SCANNED = 50
"""A session's newest rows searched for an observation; past them it counts as none."""
PENDING_SCANNED = 100
"""Old stream entries searched for a tool call, per session."""


class _Kind(msgspec.Struct):
    kind: str = ""


_decode_kind = msgspec.json.Decoder(_Kind)


async def silent_sessions(
    redis: Redis, keys: Keys, store: ReadStore, *, threshold_s: float, now_s: float
) -> int:
    """How many sessions are silent right now (the module docstring says when)."""
    silent: set[str] = set()
    states = StateStore(redis, keys)
    for row in await store.sessions(limit=SESSIONS_SCANNED):
        last = _epoch_s(row.last_activity_at)
        if last is None:
            continue
        if now_s - last > threshold_s:
            break  # sessions come newest activity first: every later one is older still
        quiet_since = _epoch_s(row.started_at) or last
        if row.observations:
            quiet_since = max(
                quiet_since, await _newest_observation_s(store, row.memory_session_id) or 0.0
            )
        if last - quiet_since < threshold_s:
            continue
        state = await states.load(row.memory_session_id)
        if state is not None and state.history:
            silent.add(row.memory_session_id)
    cutoff_ms = int((now_s - threshold_s) * 1000)
    async for raw in redis.sscan_iter(keys.sessions, count=500):
        session = as_text(raw)
        if session in silent:
            continue
        waiting_since = await _oldest_tool_call_s(redis, keys.events(session), cutoff_ms)
        if waiting_since is None:
            continue
        observed = await _newest_observation_s(store, session)
        if observed is None or observed < waiting_since:
            silent.add(session)
    return len(silent)


async def _newest_observation_s(store: ReadStore, session: str) -> float | None:
    rows = await store.observations(memory_session_id=session, limit=NEWEST_ROWS_SCANNED)
    for row in rows:
        if row.kind == "observation":
            return _epoch_s(row.created_at)
    return None


async def _oldest_tool_call_s(redis: Redis, stream: str, cutoff_ms: int) -> float | None:
    """Publish time of the oldest tool call in the stream published before cutoff_ms."""
    if cutoff_ms <= 0:
        return None
    entries = await redis.xrange(stream, min="-", max=str(cutoff_ms), count=PENDING_SCANNED)
    for entry_id, fields in entries:
        raw = fields.get(b"event", fields.get("event"))
        if raw is None:
            continue
        try:
            kind = _decode_kind.decode(raw).kind
        except msgspec.DecodeError:
            continue  # dead-lettered by the worker, not a tool call
        if kind == "tool_call":
            ms = as_text(entry_id).split("-")[0]
            return int(ms) / 1000
    return None


def _epoch_s(iso: str) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None
