"""The observer conversation of a session (its ObserverState), kept in Redis for any worker."""

from __future__ import annotations

import msgspec
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from pipeline.prompting.conversation import ObserverState
from worker.connect.lua import LuaScript
from worker.keys import Keys

STATE_TTL_S = 30 * 24 * 3600

# KEYS: lease, state   ARGV: token, json, ttl s
_SAVE = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', tonumber(ARGV[3]))
return 1
""")


class StateStore:
    """Loads and (lease-guarded) saves observer state."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def load(self, session: str) -> ObserverState | None:
        """The saved state, or None when there is none (or it is unreadable)."""
        return self.decode(await self.redis.get(self.keys.observer(session)))

    def queue_load(self, pipe: Pipeline, session: str) -> None:
        """Add the read to a pipeline; pass its reply to `decode`."""
        pipe.get(self.keys.observer(session))

    @staticmethod
    def decode(raw: bytes | None) -> ObserverState | None:
        """A saved state read from Redis, or None when missing or unreadable."""
        if raw is None:
            return None
        try:
            return msgspec.json.decode(raw, type=ObserverState)
        except msgspec.DecodeError:
            return None  # treated as lost: the continuation prompt takes over

    def queue_save(self, pipe: Pipeline, session: str, token: int, state: ObserverState) -> None:
        """Add the lease-guarded save to a pipeline (its reply is 1, or -1 when refused)."""
        keys = [self.keys.lease(session), self.keys.observer(session)]
        _SAVE.queue(pipe, keys, [token, msgspec.json.encode(state), STATE_TTL_S])
