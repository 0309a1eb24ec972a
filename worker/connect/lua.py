"""Lua scripts run atomically on Redis, loaded once per server and called by SHA."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Sequence
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import NoScriptError


class LuaScript:
    """One script: EVALSHA, falling back to EVAL when the server has not seen it yet."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(
        self, redis: Redis, keys: Sequence[str], args: Sequence[str | int | float | bytes]
    ) -> Any:
        """Run the script and return its reply."""
        try:
            return await cast(
                Awaitable[Any], redis.evalsha(self.sha, len(keys), *_flat(keys, args))
            )
        except NoScriptError:
            return await cast(
                Awaitable[Any], redis.eval(self.source, len(keys), *_flat(keys, args))
            )

    def queue(
        self, pipe: Pipeline, keys: Sequence[str], args: Sequence[str | int | float | bytes]
    ) -> None:
        """Add an EVAL of the script to a pipeline (EVAL: a pipeline cannot recover NOSCRIPT)."""
        pipe.eval(self.source, len(keys), *_flat(keys, args))


def _flat(keys: Sequence[str], args: Sequence[str | int | float | bytes]) -> list[str]:
    # redis-py annotates keys_and_args as str, but encodes bytes and numbers too.
    return cast(list[str], [*keys, *args])
