"""`memq telegram`: send stored rows to allow-listed Telegram chats; answer their commands."""

from __future__ import annotations

import asyncio
import logging
import signal

import msgspec
import typer

from worker.backoff import Backoff
from worker.settings import Settings


class TelegramTuning(msgspec.Struct, frozen=True, kw_only=True):
    """Limits and timings (Telegram's own by default; tests shorten them)."""

    per_chat_s: float = 1.0
    global_per_s: float = 30
    group_per_min: float = 20  # Telegram's cap for one group or channel; 0: none
    max_rate_limited: int = 20  # 429s waited out for one message before it is given up
    max_attempts: int = 8  # 1 + 2 + 4 + … s: rides out about two minutes of 5xx
    # 5xx and network errors: the bot module's SEND_BACKOFF, spelled out here because this
    # module must not import python-telegram-bot before the command runs.
    backoff: Backoff = Backoff(base_s=1.0, max_s=60.0, jitter=False)
    poll_timeout_s: float = 25.0
    start: str = "end"  # where a chat that never received anything starts: "end" or "beginning"
    commands: bool = True


def register(app: typer.Typer) -> None:
    """Add `memq telegram`."""
    app.command("telegram")(telegram)


def telegram() -> None:
    """Send each stored row that passes MEMQ_TELEGRAM_TYPES/_CONCEPTS to MEMQ_TELEGRAM_CHAT_IDS."""
    from worker.cli.exits import settings_with_logging
    from worker.masked_text import TokenMask

    settings = settings_with_logging()
    # httpx logs each request URL at INFO, and a Bot API URL holds the bot token.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if settings.telegram_token is not None:
        for handler in logging.getLogger().handlers:
            handler.addFilter(TokenMask(settings.telegram_token.reveal()))
    asyncio.run(run_telegram(settings))


async def run_telegram(
    settings: Settings, *, stop: asyncio.Event | None = None, tuning: TelegramTuning | None = None
) -> None:
    """Run until SIGINT/SIGTERM (or until `stop` is set); each chat finishes its row in hand."""
    from pipeline.prompting.mode_files import load_mode
    from worker.connect.redis_client import connect_redis
    from worker.fanout.telegram.api import (
        bot_token,
        build_bot,
        resolve_chats,
        start_bot,
        stop_bot,
    )
    from worker.fanout.telegram.bot import (
        TelegramFanout,
        TelegramSender,
        allowed_chats,
        redis_counter,
        retry_after_notice,
    )
    from worker.fanout.telegram.commands import TelegramCommands
    from worker.fanout.telegram.format import RowFilter
    from worker.fanout.telegram.pacing import ChatPacedLimiter
    from worker.keys import Keys
    from worker.storage.factory import open_store

    tuning = tuning or TelegramTuning()
    chats = allowed_chats(settings)
    row_filter = RowFilter.parse(settings.telegram_types, settings.telegram_concepts)
    bot_token(settings)  # refused before anything is connected
    mode = await asyncio.to_thread(load_mode, settings.mode, extra_dirs=settings.extra_modes_dirs)
    emoji = {t.id: t.emoji for t in mode.observation_types}
    stop = stop or _stop_on_signals()
    redis = await connect_redis(settings)
    store = open_store(settings)
    keys = Keys(settings.prefix)
    count = redis_counter(redis, keys)
    limiter = ChatPacedLimiter(
        per_chat_s=tuning.per_chat_s,
        overall_per_s=tuning.global_per_s,
        group_per_min=tuning.group_per_min,
        max_retries=tuning.max_rate_limited,
        on_retry_after=retry_after_notice(count),
    )
    bot = build_bot(settings, limiter)
    try:
        await start_bot(bot)
        chat_ids = await resolve_chats(bot, chats)
        sender = TelegramSender(
            bot,
            count,
            max_attempts=tuning.max_attempts,
            backoff=tuning.backoff,
        )
        fanout = TelegramFanout(
            redis, keys, sender, chat_ids, row_filter, emoji, start=tuning.start
        )
        commands = TelegramCommands(
            bot,
            sender,
            store,
            redis,
            keys,
            set(chat_ids.values()),
            emoji,
            poll_timeout_s=tuning.poll_timeout_s,
        )
        delivering = asyncio.create_task(fanout.run())
        answering = asyncio.create_task(commands.run()) if tuning.commands else None
        logging.getLogger(__name__).info(
            "telegram fan-out running",
            extra={"chats": len(chats), "types": settings.telegram_types},
        )
        await _first_of(stop, delivering)
        fanout.stop()
        if answering is not None:
            answering.cancel()
        await asyncio.gather(delivering, *(t for t in [answering] if t), return_exceptions=True)
        error = None if delivering.cancelled() else delivering.exception()
        if error is not None:
            raise error
    finally:
        await stop_bot(bot)
        await store.aclose()
        await redis.aclose()


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _first_of(stop: asyncio.Event, task: asyncio.Task[None]) -> None:
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
