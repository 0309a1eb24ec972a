"""What a stretch of work cost the bench's private redis-server: commands run and CPU used."""

from __future__ import annotations

import msgspec
import redis.asyncio as aioredis


class RedisCost(msgspec.Struct, frozen=True):
    """Commands processed and CPU seconds (user + system) of a redis-server, or a difference."""

    commands: int = 0
    cpu_s: float = 0.0

    def __sub__(self, other: RedisCost) -> RedisCost:
        return RedisCost(self.commands - other.commands, self.cpu_s - other.cpu_s)


async def redis_cost(client: aioredis.Redis) -> RedisCost:
    """The server's totals since it started (`INFO commandstats` and `INFO cpu`, one call)."""
    info = await client.info("everything")
    # Per-command calls count the commands run inside Lua scripts too; INFO itself is left out.
    calls = sum(
        int(v["calls"]) for k, v in info.items() if k.startswith("cmdstat_") and k != "cmdstat_info"
    )
    cpu = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return RedisCost(calls, cpu)
