"""Reaching the Bot API: the bot, its start and stop, chat ids, and the token kept out of text."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Sequence

from telegram import Bot
from telegram.error import BadRequest, Forbidden, InvalidToken, TelegramError
from telegram.ext import ExtBot
from telegram.request import HTTPXRequest

from worker.errors import ConfigError, WorkerError
from worker.fanout.telegram.pacing import ChatPacedLimiter
from worker.masked_text import mask_token
from worker.settings import Settings

logger = logging.getLogger(__name__)


class TelegramUnavailableError(WorkerError):
    """The Bot API could not be reached."""


def bot_token(settings: Settings) -> str:
    """MEMQ_TELEGRAM_TOKEN; ConfigError when it is not set."""
    if settings.telegram_token is None:
        raise ConfigError("MEMQ_TELEGRAM_TOKEN is not set: give the token @BotFather issued")
    return settings.telegram_token.reveal()


_SHOWN_CHARS = 80  # of a reply that is not the Bot API's, in its one-line error


class BotApiRequest(HTTPXRequest):
    """PTB's HTTP request whose replies must be the Bot API's envelope (`{"ok": …}`).

    PTB itself reads `reply["result"]` and crashed `memq telegram` with `KeyError: 'result'` on
    another server's JSON; this turns any such reply into a one-line TelegramError.
    """

    @staticmethod
    def parse_json_payload(payload: bytes) -> dict[str, object]:
        """The reply's JSON object; TelegramError when it is not a Bot API reply."""
        text = payload.decode("utf-8", "replace")
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        ok = data.get("ok") if isinstance(data, dict) else None
        if isinstance(data, dict) and isinstance(ok, bool) and (not ok or "result" in data):
            return data
        shown = " ".join(text.split())[:_SHOWN_CHARS]
        raise TelegramError(
            f"the reply is not the Bot API's (check MEMQ_TELEGRAM_API_URL): {shown!r}"
        )


def build_bot(settings: Settings, limiter: ChatPacedLimiter) -> ExtBot[int]:
    """A bot on MEMQ_TELEGRAM_API_URL whose every request goes through `limiter`."""
    token = bot_token(settings)
    # Opt in to PTB's coming timedelta periods: the int form warns on every 429 (RetryAfter).
    os.environ.setdefault("PTB_TIMEDELTA", "true")
    base = settings.telegram_api_url.rstrip("/")
    return ExtBot(
        token, base_url=f"{base}/bot", rate_limiter=limiter,
        # PTB's own defaults (one connection for getUpdates), with the envelope checked.
        request=BotApiRequest(), get_updates_request=BotApiRequest(connection_pool_size=1),
    )  # fmt: skip


async def start_bot(bot: Bot) -> None:
    """Initialize the bot (getMe); ConfigError for a refused token, unreachable otherwise."""
    try:
        await bot.initialize()
    except InvalidToken as e:
        raise ConfigError(
            f"MEMQ_TELEGRAM_TOKEN was refused by the Bot API: {mask_token(str(e), bot.token)}"
        ) from e
    except TelegramError as e:
        raise TelegramUnavailableError(
            f"cannot reach the Telegram Bot API: {mask_token(str(e), bot.token)}"
        ) from e


async def stop_bot(bot: Bot) -> None:
    """Close the bot's HTTP clients."""
    with contextlib.suppress(TelegramError):
        await bot.shutdown()


async def resolve_chats(bot: Bot, chats: Sequence[str]) -> dict[str, int]:
    """Each MEMQ_TELEGRAM_CHAT_IDS entry's numeric id; @names are looked up once (getChat)."""
    resolved: dict[str, int] = {}
    for entry in chats:
        chat_id = int(entry) if not entry.startswith("@") else await _look_up(bot, entry)
        twin = next((e for e, known in resolved.items() if known == chat_id), None)
        if twin is not None:  # two cursors on one chat would send it every row twice
            raise ConfigError(
                f"MEMQ_TELEGRAM_CHAT_IDS names chat {chat_id} twice ({twin} and {entry}): keep one"
            )
        resolved[entry] = chat_id
    return resolved


async def _look_up(bot: Bot, entry: str) -> int:
    try:
        chat = await bot.get_chat(entry)
    except (BadRequest, Forbidden) as e:
        raise ConfigError(
            f"MEMQ_TELEGRAM_CHAT_IDS holds {entry}, which the Bot API does not show this bot"
            f" ({mask_token(str(e), bot.token)}): add the bot to it or give its numeric id"
        ) from e
    except TelegramError as e:
        raise TelegramUnavailableError(
            f"cannot look up {entry} on the Telegram Bot API: {mask_token(str(e), bot.token)}"
        ) from e
    logger.info("Telegram chat resolved", extra={"chat": entry, "chat_id": chat.id})
    return chat.id
