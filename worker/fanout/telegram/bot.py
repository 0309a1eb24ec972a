"""`memq telegram`: send stored rows to allow-listed chats within Telegram's limits; commands."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError
from telegram import Bot, LinkPreviewOptions, Update
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from worker.errors import ConfigError, WorkerError
from worker.fanout.feed import FanoutConsumer, FeedItem
from worker.fanout.telegram.format import RowFilter, render_row, split_csv
from worker.keys import Keys
from worker.settings import Settings

logger = logging.getLogger(__name__)

STATS_CONSUMER = "telegram"
_NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
_MAX_RATE_LIMITED = 20  # 429 answers tolerated for one message before it is given up


class TelegramUnavailableError(WorkerError):
    """The Bot API could not be reached."""


def allowed_chats(settings: Settings) -> list[str]:
    """MEMQ_TELEGRAM_CHAT_IDS as a list: numeric ids or @channel names."""
    chats = split_csv(settings.telegram_chat_ids)
    if not chats:
        raise ConfigError("MEMQ_TELEGRAM_CHAT_IDS is empty: set the chat ids to message")
    for chat in chats:
        if not (chat.lstrip("-").isdigit() or (chat.startswith("@") and len(chat) > 1)):
            raise ConfigError(
                f"MEMQ_TELEGRAM_CHAT_IDS holds {chat!r}: use numeric chat ids or @channelnames"
            )
    return chats


def build_bot(settings: Settings) -> Bot:
    """A Bot on MEMQ_TELEGRAM_API_URL; ConfigError without MEMQ_TELEGRAM_TOKEN."""
    if settings.telegram_token is None:
        raise ConfigError("MEMQ_TELEGRAM_TOKEN is not set: give the token @BotFather issued")
    # Opt in to PTB's coming timedelta periods: the int form warns on every 429 (RetryAfter).
    os.environ.setdefault("PTB_TIMEDELTA", "true")
    base = settings.telegram_api_url.rstrip("/")
    return Bot(settings.telegram_token.reveal(), base_url=f"{base}/bot")


class RateLimiter:
    """At most one message per `per_chat_s` to each chat and `global_per_s` per second overall."""

    def __init__(self, *, per_chat_s: float = 1.0, global_per_s: int = 30) -> None:
        self.per_chat_s = per_chat_s
        self.global_per_s = global_per_s
        self._next: dict[str, float] = {}
        self._recent: deque[float] = deque()
        self._lock = asyncio.Lock()

    async def acquire(self, chat: str) -> None:
        """Wait until a message to `chat` is allowed, and take the slot."""
        loop = asyncio.get_running_loop()
        while True:
            async with self._lock:
                now = loop.time()
                while self._recent and self._recent[0] <= now - 1.0:
                    self._recent.popleft()
                wait = self._next.get(chat, now) - now
                if len(self._recent) >= self.global_per_s:
                    wait = max(wait, self._recent[0] + 1.0 - now)
                if wait <= 0:
                    self._recent.append(now)
                    self._next[chat] = now + self.per_chat_s
                    return
            await asyncio.sleep(wait)

    def defer(self, chat: str, seconds: float) -> None:
        """Telegram asked to wait (429): no message to `chat` before then."""
        until = asyncio.get_running_loop().time() + seconds
        self._next[chat] = max(self._next.get(chat, 0.0), until)


class TelegramSender:
    """Sends one message with retries: 429 waits `retry_after`, 5xx and network errors back off."""

    def __init__(
        self,
        bot: Bot,
        limiter: RateLimiter,
        count: Callable[[str], Awaitable[None]],
        *,
        max_attempts: int = 8,
        retry_base_s: float = 1.0,
        retry_max_s: float = 60.0,
    ) -> None:
        self.bot = bot
        self.limiter = limiter
        self.count = count
        self.max_attempts = max_attempts
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s

    async def send(self, chat: str, text: str, *, what: str) -> bool:
        """True once delivered; False (logged and counted) when it cannot be delivered."""
        failures = rate_limited = 0
        while True:
            await self.limiter.acquire(chat)
            try:
                await self.bot.send_message(
                    chat, text, parse_mode=ParseMode.HTML, link_preview_options=_NO_PREVIEW
                )
                await self.count("sent")
                return True
            except RetryAfter as e:
                rate_limited += 1
                wait = retry_after_seconds(e.retry_after)
                logger.warning(
                    "Telegram asked to wait", extra={"chat": chat, "retry_after_s": wait}
                )
                await self.count("rate_limited")
                if rate_limited > _MAX_RATE_LIMITED:
                    return await self._give_up(chat, what, f"still rate-limited: {e}")
                self.limiter.defer(chat, wait)
            except (BadRequest, Forbidden, InvalidToken, ChatMigrated) as e:
                return await self._give_up(chat, what, str(e))  # retrying cannot help
            except NetworkError as e:  # 5xx, timeouts, connection errors
                failures += 1
                if failures >= self.max_attempts:
                    return await self._give_up(chat, what, f"{failures} attempts: {e}")
                await self.count("retried")
                await asyncio.sleep(min(self.retry_max_s, self.retry_base_s * 2 ** (failures - 1)))
            except TelegramError as e:  # anything else the API said: not worth repeating
                return await self._give_up(chat, what, str(e))

    async def _give_up(self, chat: str, what: str, reason: str) -> bool:
        logger.error(
            "Telegram message undeliverable", extra={"chat": chat, "row": what, "reason": reason}
        )
        await self.count("undeliverable")
        return False


class TelegramFanout:
    """One feed consumer per allow-listed chat (its own cursor), sharing the rate limits."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        sender: TelegramSender,
        chats: Sequence[str],
        row_filter: RowFilter,
        emoji: Mapping[str, str],
        *,
        start: str = "end",
        poll_interval_s: float = 1.0,
    ) -> None:
        self.sender = sender
        self.row_filter = row_filter
        self.emoji = emoji
        self.consumers = [
            FanoutConsumer(
                redis,
                keys,
                self._handler(chat),
                name=f"{STATS_CONSUMER}:{chat}",
                start="beginning" if start == "beginning" else "end",
                poll_interval_s=poll_interval_s,
            )
            for chat in chats
        ]

    async def run(self) -> None:
        """Deliver until stop(); each chat resumes where it stopped."""
        async with asyncio.TaskGroup() as group:
            for consumer in self.consumers:
                group.create_task(consumer.run())

    def stop(self) -> None:
        """Finish the row in hand for every chat, then return from run()."""
        for consumer in self.consumers:
            consumer.stop()

    def _handler(self, chat: str) -> Callable[[FeedItem], Awaitable[None]]:
        async def deliver(item: FeedItem) -> None:
            if not self.row_filter.matches(item.row):
                return
            for text in render_row(item.row, self.emoji):
                await self.sender.send(chat, text, what=item.key)

        return deliver


def redis_counter(redis: Redis, keys: Keys) -> Callable[[str], Awaitable[None]]:
    """Counts Telegram outcomes in `<prefix>:fanout:telegram:stats`; a Redis failure is logged."""

    async def count(outcome: str) -> None:
        try:
            await cast(Awaitable[int], redis.hincrby(keys.fanout_stats(STATS_CONSUMER), outcome, 1))
        except (RedisError, OSError) as e:
            logger.warning(
                "Telegram counter not saved", extra={"outcome": outcome, "error": str(e)}
            )

    return count


def is_allowed(update: Update, chats: Sequence[str]) -> bool:
    """True when the update comes from an allow-listed chat."""
    chat = update.effective_chat
    if chat is None:
        return False
    return str(chat.id) in chats or (chat.username is not None and f"@{chat.username}" in chats)


async def start_bot(bot: Bot) -> None:
    """Initialize the bot (getMe); ConfigError for a refused token, unreachable otherwise."""
    try:
        await bot.initialize()
    except InvalidToken as e:
        raise ConfigError(f"MEMQ_TELEGRAM_TOKEN was refused by the Bot API: {e}") from e
    except TelegramError as e:
        raise TelegramUnavailableError(f"cannot reach the Telegram Bot API: {e}") from e


async def stop_bot(bot: Bot) -> None:
    """Close the bot's HTTP clients."""
    with contextlib.suppress(TelegramError):
        await bot.shutdown()


def retry_after_seconds(value: int | timedelta) -> float:
    """A RetryAfter delay (int seconds or timedelta, depending on PTB settings) in seconds."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
