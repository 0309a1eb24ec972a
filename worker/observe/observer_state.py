"""The observer conversation of a session, kept in Redis so any worker can continue it."""

from __future__ import annotations

import msgspec
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from worker.connect.lua import LuaScript
from worker.keys import Keys
from worker.observers.protocol import Turn as ConversationTurn

STATE_TTL_S = 30 * 24 * 3600

# KEYS: lease, state   ARGV: token, json, ttl s
_SAVE = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', tonumber(ARGV[3]))
return 1
""")


class ObserverState(msgspec.Struct, kw_only=True):
    """What the next turn needs: the system prompt, bounded history, request, retries."""

    system: str
    history: list[ConversationTurn] = []
    project: str = ""
    user_request: str = ""
    prompt_number: int = 0
    told_prompt_number: int = 0
    """The highest prompt number the observer has been shown."""


def bounded_history(
    history: list[ConversationTurn], max_turns: int, max_chars: int
) -> list[ConversationTurn]:
    """Keep the newest turns within both limits; the oldest are dropped first."""
    kept = history[-max_turns:] if max_turns > 0 else []
    total = sum(len(t.user) + len(t.assistant) for t in kept)
    while kept and total > max_chars:
        total -= len(kept[0].user) + len(kept[0].assistant)
        kept = kept[1:]
    return kept


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

    async def save(self, session: str, token: int, state: ObserverState) -> bool:
        """Save state if the lease is still ours; False when it was refused."""
        pipe = self.redis.pipeline(transaction=False)
        self.queue_save(pipe, session, token, state)
        (done,) = await pipe.execute()
        return int(done) == 1

    def queue_save(self, pipe: Pipeline, session: str, token: int, state: ObserverState) -> None:
        """Add the lease-guarded save to a pipeline (its reply is 1, or -1 when refused)."""
        keys = [self.keys.lease(session), self.keys.observer(session)]
        _SAVE.queue(pipe, keys, [token, msgspec.json.encode(state), STATE_TTL_S])
