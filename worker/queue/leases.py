"""Per-session leases with fencing tokens: at most one job drives a session at any moment."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from worker.connect.lua import LuaScript
from worker.errors import LeaseLostError
from worker.keys import Keys
from worker.logs import bind_session

logger = logging.getLogger(__name__)

# KEYS: lease, fence   ARGV: ttl ms  -> token, or 0 when another holder has the lease
_ACQUIRE = LuaScript("""
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', tonumber(ARGV[1]))
return token
""")
# KEYS: lease   ARGV: token, ttl ms  -> 1 renewed, 0 lost
_RENEW = LuaScript("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
""")
# KEYS: lease   ARGV: token
_RELEASE = LuaScript("""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
""")


# KEYS: fence   ARGV: floor -> raise the counter to at least `floor`
_RAISE_FENCE = LuaScript("""
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
""")


async def raise_fence_floor(redis: Redis, keys: Keys, session: str, floor: int) -> None:
    """Make the next token exceed `floor`: storage saw that fence, Redis lost its counter.

    Without this, a Redis that lost `fence:<session>` (no persistence) hands out tokens
    storage refuses forever; a genuinely stale holder is unaffected (its token stays old).
    """
    await _RAISE_FENCE(redis, [keys.fence(session)], [floor])


class Lease:
    """A held lease; `token` increases with every acquisition (the fencing token)."""

    def __init__(self, redis: Redis, keys: Keys, session: str, token: int, ttl_ms: int) -> None:
        self.redis = redis
        self.key = keys.lease(session)
        self.session = session
        self.token = token
        self.ttl_ms = ttl_ms
        self.lost = False
        self._renewer: asyncio.Task[None] | None = None

    @classmethod
    async def acquire(cls, redis: Redis, keys: Keys, session: str, ttl_ms: int) -> Lease | None:
        """Take the session's lease, or None while someone else holds it."""
        token = await _ACQUIRE(redis, [keys.lease(session), keys.fence(session)], [ttl_ms])
        return cls.taken(redis, keys, session, token, ttl_ms)

    @staticmethod
    def queue_acquire(pipe: Pipeline, keys: Keys, session: str, ttl_ms: int) -> None:
        """Add the acquisition to a pipeline; pass its reply to `taken`."""
        _ACQUIRE.queue(pipe, [keys.lease(session), keys.fence(session)], [ttl_ms])

    @classmethod
    def taken(cls, redis: Redis, keys: Keys, session: str, token: Any, ttl_ms: int) -> Lease | None:
        """The lease an acquisition's reply gave (renewed from now on), or None."""
        if not token:
            return None
        lease = cls(redis, keys, session, int(token), ttl_ms)
        lease._renewer = asyncio.create_task(lease._renew_forever())
        return lease

    async def _renew_forever(self) -> None:
        # Renew at a third of the TTL so one missed renewal does not lose the lease.
        bind_session(self.session)  # this task's own context: a re-drive holds leases too
        while not self.lost:
            await asyncio.sleep(self.ttl_ms / 3000)
            try:
                ok = await _RENEW(self.redis, [self.key], [self.token, self.ttl_ms])
            except Exception as e:  # Redis blip: the next round retries; expiry fences us.
                logger.warning("lease renewal failed: %s", e)
                continue
            if not ok:
                self.lost = True
                logger.warning("lease lost to another holder")

    def check(self) -> None:
        """Raise LeaseLostError when the lease is known to be lost."""
        if self.lost:
            raise LeaseLostError(f"lease of session {self.session} lost (token {self.token})")

    async def release(self) -> None:
        """Stop renewing and give the lease back if it is still ours."""
        await self.stop_renewing()
        with contextlib.suppress(Exception):
            await _RELEASE(self.redis, [self.key], [self.token])

    async def stop_renewing(self) -> None:
        """Stop the renewals (the lease then expires unless released)."""
        self.lost = True
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer

    def queue_release(self, pipe: Pipeline) -> None:
        """Add the release (if still ours) to a pipeline; call `stop_renewing` first."""
        _RELEASE.queue(pipe, [self.key], [self.token])
