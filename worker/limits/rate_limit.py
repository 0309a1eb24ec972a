"""Fleet-wide observer rate limits: token buckets in Redis shared by every worker of a tenant.

Two buckets per provider and model, refilled continuously by the server's clock (so workers
on machines with skewed clocks agree): requests per minute, taken one per call, and tokens
per minute, charged after each call with the usage the API reported (it may go negative:
the next call then waits until it has refilled). A provider's `retry-after` also sets a
short fleet-wide pause that every worker waits out before its next call.
"""

from __future__ import annotations

from redis.asyncio import Redis

from worker.connect.lua import LuaScript
from worker.errors import WorkerError
from worker.keys import Keys
from worker.limits.pauses import ProviderPausedError

MAX_SHORT_PAUSE_S = 60.0
"""The longest fleet-wide short pause a retry-after sets (the turn itself honours longer ones)."""
_IDLE_TTL_MS = 120_000  # an idle bucket is full again after a minute: let it expire

# Shared Lua: refill both buckets to `now` (ms from the server's TIME).
_REFILL = """
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'req', 'tok', 'at')
local req = tonumber(state[1]) or rpm
local tok = tonumber(state[2]) or tpm
local elapsed = math.max(0, now - (tonumber(state[3]) or now))
req = math.min(rpm, req + elapsed * rpm / 60000)
tok = math.min(tpm, tok + elapsed * tpm / 60000)
local function save()
  redis.call('HSET', KEYS[1], 'req', tostring(req), 'tok', tostring(tok), 'at', now)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
end
"""

# KEYS: bucket, short pause, pause   ARGV: rpm, tpm, idle ttl ms
# -> 0 when the call may go (one request taken), else the ms to wait (nothing taken), or
# minus the ms left on a quota pause of the provider (checked here: one round trip a call)
_ACQUIRE = LuaScript(
    """
local paused = redis.call('PTTL', KEYS[3])
if paused > 0 then return -paused end
local short = redis.call('PTTL', KEYS[2])
if short > 0 then return short end
if tonumber(ARGV[1]) <= 0 and tonumber(ARGV[2]) <= 0 then return 0 end
"""
    + _REFILL
    + """
local wait = 0
if rpm > 0 and req < 1 then wait = math.ceil((1 - req) * 60000 / rpm) end
if tpm > 0 and tok < 1 then wait = math.max(wait, math.ceil((1 - tok) * 60000 / tpm)) end
if wait == 0 and rpm > 0 then req = req - 1 end
save()
return wait
"""
)

# KEYS: bucket   ARGV: rpm, tpm, idle ttl ms, tokens
_CHARGE = LuaScript(
    _REFILL
    + """
tok = tok - tonumber(ARGV[4])
save()
return 1
"""
)

# KEYS: short pause   ARGV: ms, reason  -> keeps the longer of the current and the new one
_PAUSE_SHORTLY = LuaScript("""
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[1]))
end
return 1
""")


class ThrottledError(WorkerError):
    """The fleet is over a rate limit (or in a short pause): the call must wait `wait_s`."""

    def __init__(self, message: str, wait_s: float) -> None:
        super().__init__(message)
        self.wait_s = wait_s


class RateLimiter:
    """The rate limits of one provider and model, as every worker of the tenant shares them."""

    def __init__(
        self, redis: Redis, keys: Keys, provider: str, model: str, *, rpm: int, tpm: int
    ) -> None:
        self.redis = redis
        self.provider = provider
        self.rpm = rpm
        self.tpm = tpm
        self._bucket = keys.rate_limit(provider, model)
        self._short_pause = keys.short_pause(provider)
        self._pause = keys.pause(provider)

    async def acquire(self) -> float:
        """Take one request: 0.0 when the call may go now, else the seconds to wait first.

        Raises ProviderPausedError while a quota pause of the provider lasts.
        """
        wait_ms = int(
            await _ACQUIRE(
                self.redis,
                [self._bucket, self._short_pause, self._pause],
                [self.rpm, self.tpm, _IDLE_TTL_MS],
            )
        )
        if wait_ms < 0:
            raise ProviderPausedError(
                f"{self.provider} observer paused for {-wait_ms / 1000:.1f} s more", -wait_ms / 1000
            )
        return wait_ms / 1000

    async def charge(self, tokens: int) -> None:
        """Charge one call's reported tokens (input + output) to the tokens-per-minute bucket."""
        if self.tpm > 0 and tokens > 0:
            await _CHARGE(self.redis, [self._bucket], [self.rpm, self.tpm, _IDLE_TTL_MS, tokens])

    async def pause_shortly(self, seconds: float, reason: str) -> float:
        """Make every worker wait before its next call to this provider; returns the wait set."""
        seconds = min(MAX_SHORT_PAUSE_S, seconds)
        if seconds <= 0:
            return 0.0
        await _PAUSE_SHORTLY(
            self.redis, [self._short_pause], [max(1, int(seconds * 1000)), reason[:200]]
        )
        return seconds
