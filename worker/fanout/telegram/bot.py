"""`memq telegram`: send stored rows to allow-listed chats within Telegram's limits; commands."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
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

from worker.backoff import Backoff
from worker.errors import ConfigError
from worker.fanout.feed import FanoutConsumer
from worker.fanout.feed_items import FeedItem
from worker.fanout.telegram.format import RowFilter, render_row, split_csv
from worker.keys import Keys
from worker.masked_text import mask_token
from worker.settings import Settings

logger = logging.getLogger(__name__)

STATS_CONSUMER = "telegram"
_NO_PREVIEW = LinkPreviewOptions(is_disabled=True)
SEND_BACKOFF = Backoff(base_s=1.0, max_s=60.0, jitter=False)
"""A send failing with 5xx or a network error: 1 s doubling to a minute."""


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


class TelegramSender:
    """Sends one message: the bot's limiter paces it and waits out 429s; 5xx and network errors
    back off here."""

    def __init__(
        self,
        bot: Bot,
        count: Callable[[str], Awaitable[None]],
        *,
        max_attempts: int = 8,
        backoff: Backoff = SEND_BACKOFF,
    ) -> None:
        self.bot = bot
        self.count = count
        self.max_attempts = max_attempts
        self.backoff = backoff

    async def send(self, chat: int, text: str, *, what: str) -> bool:
        """True once delivered; False (logged and counted) when it cannot be delivered."""
        failures = 0
        while True:
            try:
                await self.bot.send_message(
                    chat, text, parse_mode=ParseMode.HTML, link_preview_options=_NO_PREVIEW
                )
                await self.count("sent")
                return True
            except RetryAfter as e:  # the bot's limiter waited out all it would
                return await self._give_up(chat, what, f"still rate-limited: {e}")
            except (BadRequest, Forbidden, InvalidToken, ChatMigrated) as e:
                return await self._give_up(chat, what, str(e))  # retrying cannot help
            except NetworkError as e:  # 5xx, timeouts, connection errors
                failures += 1
                if failures >= self.max_attempts:
                    return await self._give_up(chat, what, f"{failures} attempts: {e}")
                await self.count("retried")
                await asyncio.sleep(self.backoff.delay_s(failures))
            except TelegramError as e:  # anything else the API said: not worth repeating
                return await self._give_up(chat, what, str(e))

    async def _give_up(self, chat: int, what: str, reason: str) -> bool:
        logger.error(
            "Telegram message undeliverable",
            extra={"chat": chat, "row": what, "reason": mask_token(reason, self.bot.token)},
        )
        await self.count("undeliverable")
        return False


class TelegramFanout:
    """One feed consumer per allow-listed chat, sharing the rate limits; `chats` maps each
    MEMQ_TELEGRAM_CHAT_IDS entry (its cursor's name) to the chat id it sends to."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        sender: TelegramSender,
        chats: Mapping[str, int],
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
                self._handler(chat_id),
                name=f"{STATS_CONSUMER}:{entry}",
                start="beginning" if start == "beginning" else "end",
                poll_interval_s=poll_interval_s,
            )
            for entry, chat_id in chats.items()
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

    def _handler(self, chat: int) -> Callable[[FeedItem], Awaitable[None]]:
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


def retry_after_notice(
    count: Callable[[str], Awaitable[None]],
) -> Callable[[str, float], Awaitable[None]]:
    """The limiter's hook for each 429 it waits out: logged and counted as `rate_limited`."""

    async def notice(chat: str, wait_s: float) -> None:
        logger.warning("Telegram asked to wait", extra={"chat": chat, "retry_after_s": wait_s})
        await count("rate_limited")

    return notice


def is_allowed(update: Update, chat_ids: Collection[int]) -> bool:
    """True when the update comes from an allow-listed chat id (a @username can change owner;
    the id it resolved to at startup cannot)."""
    chat = update.effective_chat
    return chat is not None and chat.id in chat_ids
