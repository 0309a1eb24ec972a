"""The bot's commands (/recent, /search, /stats), read by getUpdates long polling."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection, Mapping
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError
from telegram import Bot, Update
from telegram.error import RetryAfter, TelegramError

from worker.backoff import Backoff
from worker.fanout.telegram.bot import STATS_CONSUMER, TelegramSender, is_allowed
from worker.fanout.telegram.format import Block, escape, split_blocks
from worker.fanout.telegram.pacing import retry_after_seconds
from worker.keys import Keys
from worker.masked_text import mask_token
from worker.ops.stats import collect_stats
from worker.search.hybrid import BadQueryError, search
from worker.storage.protocol import Store, StoreError
from worker.storage.records import StoredRow

logger = logging.getLogger(__name__)

HELP = (
    "<b>memq</b> commands:\n/recent — the newest observations\n"
    "/search &lt;words&gt; — keyword search\n/stats — the fleet's figures"
)
_SHOWN = 5
# getUpdates failing (another poller, 5xx): 1 s doubling to a minute; one poller, no jitter.
_POLL_BACKOFF = Backoff(base_s=1.0, max_s=60.0, jitter=False)


class TelegramCommands:
    """Answers commands from allow-listed chat ids; every other chat is ignored (and counted)."""

    def __init__(
        self,
        bot: Bot,
        sender: TelegramSender,
        store: Store,
        redis: Redis,
        keys: Keys,
        chat_ids: Collection[int],
        emoji: Mapping[str, str],
        *,
        poll_timeout_s: float = 25.0,
    ) -> None:
        self.bot = bot
        self.sender = sender
        self.store = store
        self.redis = redis
        self.keys = keys
        self.chat_ids = chat_ids
        self.emoji = emoji
        self.poll_timeout_s = poll_timeout_s

    async def run(self) -> None:
        """Poll and answer until cancelled; the offset is kept in Redis across restarts."""
        offset = int(await self.redis.get(self.keys.telegram_updates_offset) or 0)
        failures = 0
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=offset or None,
                    timeout=int(self.poll_timeout_s),
                    allowed_updates=["message"],
                )
                failures = 0
            except RetryAfter as e:
                await asyncio.sleep(retry_after_seconds(e.retry_after))
                continue
            except TelegramError as e:  # another poller (409), network errors, 5xx
                failures += 1
                error = mask_token(str(e), self.bot.token)
                logger.warning("getUpdates failed", extra={"error": error, "attempt": failures})
                await asyncio.sleep(_POLL_BACKOFF.delay_s(failures))
                continue
            for update in updates:
                offset = update.update_id + 1
                await self.answer(update)
                await self._save_offset(offset)

    async def answer(self, update: Update) -> None:
        """Reply to one update when it is a command from an allow-listed chat."""
        message = update.message
        if message is None or not message.text or not message.text.startswith("/"):
            return
        if not is_allowed(update, self.chat_ids):
            logger.info("command from a chat not on the allow-list ignored")
            await self.sender.count("ignored_chat")
            return
        chat = message.chat.id
        command, _, argument = message.text.partition(" ")
        name = command[1:].split("@", 1)[0].lower()
        try:
            reply = await self._reply(name, argument.strip())
        except (StoreError, RedisError, OSError) as e:
            logger.warning("command failed", extra={"command": name, "error": str(e)})
            reply = [Block("", f"Sorry, /{name} failed: {e}")]
        for text in split_blocks(reply):
            await self.sender.send(chat, text, what=f"/{name}")

    async def _reply(self, name: str, argument: str) -> list[Block]:
        if name == "recent":
            rows = await self.store.observations(limit=_SHOWN)
            return [Block("<b>", "Newest", "</b>")] + [self._line(r) for r in rows]
        if name == "search":
            try:
                found = await search(self.store, argument, limit=_SHOWN, mode="fts")
            except BadQueryError:
                return [Block("", "Usage: /search words to look for")]
            head = Block("<b>", f"{len(found.hits)} matches for “{argument}”", "</b>")
            return [head] + [
                Block(
                    f"{escape(self.emoji.get(h.type or '', '•'))} <b>",
                    h.title or "(untitled)",
                    f"</b> · <code>{escape(h.project)}</code> · #{h.id}\n{escape(h.snippet)}",
                )
                for h in found.hits
            ]
        if name == "stats":
            return self._stats_blocks(await self._stats())
        return [Block("", "", HELP)]

    def _line(self, row: StoredRow) -> Block:
        if row.kind == "summary":
            mark, title = "📋", row.request or "Summary"
        else:
            mark, title = self.emoji.get(row.type or "", "•"), row.title or "(untitled)"
        return Block(
            f"{escape(mark)} <b>",
            title,
            f"</b> · <code>{escape(row.project)}</code> · #{row.id}",
            gap="\n",
        )

    async def _stats(self) -> dict[str, object]:
        stats = await collect_stats(self.redis, self.keys, self.store)
        key = self.keys.fanout_stats(STATS_CONSUMER)
        raw = await cast(Awaitable[dict[bytes, bytes]], self.redis.hgetall(key))
        telegram = {k.decode(): int(v) for k, v in raw.items()}
        return {
            "pending": stats.streams.pending,
            "paused": ", ".join(stats.paused_providers) or "none",
            "dead letters": stats.dead_letters,
            **{f"outcome {k}": v for k, v in sorted(stats.outcomes.items()) if ":" not in k},
            **{f"telegram {k}": v for k, v in sorted(telegram.items())},
        }

    @staticmethod
    def _stats_blocks(figures: Mapping[str, object]) -> list[Block]:
        lines = [Block(f"{escape(k)}: <b>", str(v), "</b>", gap="\n") for k, v in figures.items()]
        return [Block("<b>", "memq stats", "</b>"), *lines]

    async def _save_offset(self, offset: int) -> None:
        try:
            await self.redis.set(self.keys.telegram_updates_offset, offset)
        except (RedisError, OSError) as e:
            logger.warning("getUpdates offset not saved", extra={"error": str(e)})
