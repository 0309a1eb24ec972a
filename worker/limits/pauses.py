"""Fleet-wide provider pauses: a quota reply pauses the provider for every worker, with a TTL."""

from __future__ import annotations

from redis.asyncio import Redis

from pipeline.turns.decide import MAX_PAUSE_S
from worker.errors import WorkerError
from worker.keys import Keys


class ProviderPausedError(WorkerError):
    """A quota pause of the provider is in force: no call for `remaining_s`."""

    def __init__(self, message: str, remaining_s: float) -> None:
        super().__init__(message)
        self.remaining_s = remaining_s


class Pauses:
    """Sets and reads `<prefix>:pause:<provider>` keys."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def pause(self, provider: str, seconds: float, reason: str) -> float:
        """Pause a provider for `seconds` (capped at 6 h); returns the pause actually set."""
        seconds = max(1.0, min(MAX_PAUSE_S, seconds))
        await self.redis.set(self.keys.pause(provider), reason[:500], px=int(seconds * 1000))
        return seconds

    async def remaining_s(self, provider: str) -> float:
        """Seconds left on a provider's pause; 0 when it is not paused."""
        ttl_ms = await self.redis.pttl(self.keys.pause(provider))
        return max(0.0, ttl_ms / 1000) if ttl_ms and ttl_ms > 0 else 0.0

    async def paused_providers(self) -> list[str]:
        """Providers paused right now."""
        return [p for p in ("anthropic", "openai") if await self.remaining_s(p) > 0]
