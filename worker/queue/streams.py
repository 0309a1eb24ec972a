"""One session's event stream: consumer-group reads, reclaiming, guarded acks, dead letters."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import ResponseError

from worker.connect.lua import LuaScript
from worker.errors import LeaseLostError
from worker.keys import CONSUMER_GROUP, Keys
from worker.redis_text import as_text

# Acks are fenced: only the current lease holder may ack (and delete) entries.
# KEYS: lease, stream   ARGV: token, group, id...
_ACK = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local ids = {}
for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return 0 end
redis.call('XACK', KEYS[2], ARGV[2], unpack(ids))
return redis.call('XDEL', KEYS[2], unpack(ids))
""")

# KEYS: lease, stream, dead   ARGV: token, group, session, now ms, maxlen, then (id, raw, reason)*
_DEAD_LETTER = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local n = 0
for i = 6, #ARGV, 3 do
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'session', ARGV[3],
             'entry_id', ARGV[i], 'event', ARGV[i + 1], 'reason', ARGV[i + 2],
             'failed_at_ms', ARGV[4])
  redis.call('XACK', KEYS[2], ARGV[2], ARGV[i])
  redis.call('XDEL', KEYS[2], ARGV[i])
  n = n + 1
end
return n
""")

# KEYS: lease, stream, sessions   ARGV: token, session
_DELETE_IF_DRAINED = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('XLEN', KEYS[2]) > 0 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[2])
return 1
""")

# Pending entries first (taken over by this consumer), then new ones up to the count: one
# round trip, and never more entries delivered than asked for.
# KEYS: stream   ARGV: group, consumer, count   -> {claimed, new}, each {id, {field, value...}}*
_CLAIM_AND_READ = LuaScript("""
local n = tonumber(ARGV[3])
local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, '0-0', 'COUNT', n)[2]
local fresh = {}
if #claimed < n then
  local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', n - #claimed,
                       'STREAMS', KEYS[1], '>')
  if r then fresh = r[1][2] end
end
return {claimed, fresh}
""")

DEAD_LETTER_MAXLEN = 100_000


class Entry(msgspec.Struct, frozen=True):
    """One raw stream entry: its id and the `event` field (None when the field is missing).

    `claimed`: delivered before (taken over from the pending list), so possibly stored by a
    holder that crashed before acking; a new entry never is (publish dedupes event ids).
    """

    id: str
    raw: bytes | None
    claimed: bool = False

    @property
    def published_ms(self) -> int:
        """Milliseconds since the epoch when Redis added the entry (from its id)."""
        return int(self.id.split("-", 1)[0])


class SessionStream:
    """Reads and acks one session's stream on behalf of the current lease holder."""

    def __init__(self, redis: Redis, keys: Keys, session: str, consumer: str) -> None:
        self.redis = redis
        self.keys = keys
        self.session = session
        self.key = keys.events(session)
        self.consumer = consumer
        # New entries read ahead by a commit's pipeline, handed out by the next new-only read.
        self._ahead: list[Entry] | None = None

    async def ensure_group(self) -> None:
        """Create the consumer group (and the stream) if missing."""
        try:
            await self.redis.xgroup_create(self.key, CONSUMER_GROUP, id="0", mkstream=True)
        except ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise

    async def read(self, count: int, *, claim: bool = True) -> list[Entry]:
        """Up to `count` entries in id order: first every pending one (if `claim`), then new ones.

        Pending entries belong to an earlier holder of this session's lease (a dead or
        stale worker, or our own stopped turn): holding the lease, we take them over. A
        missing consumer group is created on first need. A new-only read first hands out
        what a commit read ahead (`queue_read_ahead`); a claiming read drops that, since it
        takes those entries over again anyway.
        """
        ahead, self._ahead = self._ahead, None
        if ahead is not None and not claim:
            if len(ahead) > count:
                ahead, self._ahead = ahead[:count], ahead[count:]
            return ahead
        try:
            return await self._read(count, claim)
        except ResponseError as e:
            if "NOGROUP" not in str(e):
                raise
        await self.ensure_group()
        return await self._read(count, claim)

    async def _read(self, count: int, claim: bool) -> list[Entry]:
        if claim:
            claimed, fresh = await _CLAIM_AND_READ(
                self.redis, [self.key], [CONSUMER_GROUP, self.consumer, count]
            )
            return [
                *(_flat_entry(i, f, claimed=True) for i, f in claimed if f),
                *(_flat_entry(i, f, claimed=False) for i, f in fresh if f),
            ]
        reply: Any = await self.redis.xreadgroup(
            CONSUMER_GROUP, self.consumer, {self.key: ">"}, count=count
        )
        return [_entry(i, f) for _stream, items in reply or [] for i, f in items]

    def queue_read_ahead(self, pipe: Pipeline, count: int) -> None:
        """Add a read of up to `count` new entries to a pipeline; pass its reply to `keep_ahead`."""
        pipe.xreadgroup(CONSUMER_GROUP, self.consumer, {self.key: ">"}, count=count)

    def keep_ahead(self, reply: Any) -> None:
        """Keep what a queued read-ahead returned for the next new-only `read`."""
        self._ahead = [_entry(i, f) for _stream, items in reply or [] for i, f in items]

    async def ack(self, token: int, ids: Sequence[str]) -> None:
        """Ack and delete entries; raises LeaseLostError when the lease is no longer ours."""
        if not ids:
            return
        done = await _ACK(
            self.redis, [self.keys.lease(self.session), self.key], [token, CONSUMER_GROUP, *ids]
        )
        self.check_ack(token, done)

    def queue_ack(self, pipe: Pipeline, token: int, ids: Sequence[str]) -> None:
        """Add the guarded ack of `ids` to a pipeline; pass its reply to `check_ack`."""
        _ACK.queue(pipe, [self.keys.lease(self.session), self.key], [token, CONSUMER_GROUP, *ids])

    def check_ack(self, token: int, reply: Any) -> None:
        """Raise LeaseLostError when a queued ack was refused (the lease is someone else's)."""
        if int(reply) < 0:
            raise LeaseLostError(f"session {self.session}: ack refused, lease token {token} stale")

    async def dead_letter(self, token: int, entries: Sequence[tuple[Entry, str]]) -> None:
        """Move entries with their reasons to the dead-letter stream, then ack them."""
        if not entries:
            return
        args: list[str | int | bytes] = [
            token,
            CONSUMER_GROUP,
            self.session,
            int(time.time() * 1000),
            DEAD_LETTER_MAXLEN,
        ]
        for entry, reason in entries:
            args += [entry.id, entry.raw or b"", reason]
        keys = [self.keys.lease(self.session), self.key, self.keys.dead]
        if int(await _DEAD_LETTER(self.redis, keys, args)) < 0:
            raise LeaseLostError(
                f"session {self.session}: dead-letter refused, token {token} stale"
            )

    async def delete_if_drained(self, token: int) -> bool:
        """Delete the stream of an ended session once it holds no entry."""
        keys = [self.keys.lease(self.session), self.key, self.keys.sessions]
        return int(await _DELETE_IF_DRAINED(self.redis, keys, [token, self.session])) == 1


def _flat_entry(entry_id: bytes, fields: list[bytes], *, claimed: bool) -> Entry:
    """An entry as a script returns it: fields as a flat [name, value, ...] list."""
    raw = next((fields[i + 1] for i in range(0, len(fields) - 1, 2) if fields[i] == b"event"), None)
    return Entry(entry_id.decode(), raw, claimed)


def _entry(entry_id: bytes | str, fields: dict[bytes, bytes]) -> Entry:
    eid = as_text(entry_id)
    return Entry(eid, fields.get(b"event"))
