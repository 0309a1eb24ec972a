"""Telegram's flood limits: PTB's AIORateLimiter plus one message per interval to each chat."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any

from aiolimiter import AsyncLimiter
from telegram.error import RetryAfter
from telegram.ext import AIORateLimiter

ApiResult = bool | dict[str, Any] | list[dict[str, Any]]
_MARGIN_S = 0.1  # added to retry_after, as AIORateLimiter does


class ChatPacedLimiter(AIORateLimiter):
    """AIORateLimiter (overall and per-group caps; a 429 pauses every request of the bot),
    and at most one request per `per_chat_s` to each chat; `on_retry_after` hears every 429."""

    def __init__(
        self,
        *,
        per_chat_s: float,
        overall_per_s: float,
        group_per_min: float,
        max_retries: int,
        on_retry_after: Callable[[str, float], Awaitable[None]],
    ) -> None:
        super().__init__(
            overall_max_rate=overall_per_s,
            overall_time_period=1,
            group_max_rate=group_per_min,
            group_time_period=60,
            max_retries=max_retries,
        )
        self.per_chat_s = per_chat_s
        self.on_retry_after = on_retry_after
        self._chats: dict[str, AsyncLimiter] = {}
        # PTB 22.8 lifts its 429 halt when any request finishes, even one in flight when the
        # 429 came (python-telegram-bot#5338): every request also waits for this deadline.
        self._halt_until = 0.0

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, ApiResult]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> ApiResult:
        """Wait for the chat's turn, then let AIORateLimiter send (and wait out 429s)."""
        chat_id = data.get("chat_id")
        chat = None if chat_id is None else str(chat_id)
        if chat is not None and self.per_chat_s > 0:
            await self._pace(chat).acquire()

        async def halting_on_429s(*call_args: Any, **call_kwargs: Any) -> ApiResult:
            loop = asyncio.get_running_loop()
            # A deadline, not an event: a 429 during the wait may move it later.
            while (wait_s := self._halt_until - loop.time()) > 0:  # noqa: ASYNC110
                await asyncio.sleep(wait_s)
            try:
                return await callback(*call_args, **call_kwargs)
            except RetryAfter as e:
                wait_s = retry_after_seconds(e.retry_after)
                self._halt_until = max(self._halt_until, loop.time() + wait_s + _MARGIN_S)
                if chat is not None:
                    await self.on_retry_after(chat, wait_s)
                raise

        return await super().process_request(
            halting_on_429s, args, kwargs, endpoint, data, rate_limit_args
        )

    def _pace(self, chat: str) -> AsyncLimiter:
        # A bucket of one that drains in per_chat_s: sends start at least per_chat_s apart.
        if chat not in self._chats:
            self._chats[chat] = AsyncLimiter(1, self.per_chat_s)
        return self._chats[chat]


def retry_after_seconds(value: int | timedelta) -> float:
    """A RetryAfter delay (int seconds or timedelta, depending on PTB settings) in seconds."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
