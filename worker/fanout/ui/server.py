"""Run the web UI: check the bind, open Redis and the store, serve until stopped."""

from __future__ import annotations

import asyncio
import logging

from pipeline.prompting.mode_files import load_mode
from worker.connect.redis_client import connect_redis
from worker.fanout.ui.app import UiDeps, build_app, check_bind
from worker.fanout.ui.live import FeedHub
from worker.fanout.ui.pages import TypeLabel
from worker.http_serving import Listener, serve_until_stopped
from worker.keys import Keys
from worker.ops.cost import prices_from
from worker.settings import Settings
from worker.storage.factory import open_store

logger = logging.getLogger(__name__)


def type_labels(settings: Settings) -> dict[str, TypeLabel]:
    """The mode's observation types as the cards show them (emoji, label)."""
    mode = load_mode(settings.mode, extra_dirs=settings.extra_modes_dirs)
    return {t.id: TypeLabel(t.emoji, t.label) for t in mode.observation_types}


async def run_ui(settings: Settings, listener: Listener) -> None:
    """Serve the web UI until SIGINT/SIGTERM, or until the listener's `stop` is set."""
    token = settings.ui_token.reveal() if settings.ui_token else None
    check_bind(listener.host, token)
    labels = await asyncio.to_thread(type_labels, settings)
    redis = await connect_redis(settings)
    store = open_store(settings)
    try:
        await store.ping()
        keys = Keys(settings.prefix)
        deps = UiDeps(
            redis, keys, store, labels, token, settings.ui_max_streams, prices_from(settings)
        )
        app = build_app(deps)
        hub: FeedHub = app.state.hub
        await serve_until_stopped(
            app, listener, logger=logger, announce="web UI listening on %s",
            # Open event streams would hold the shutdown for its grace period: end them first.
            on_stop=hub.close_streams,
        )  # fmt: skip
    finally:
        await store.aclose()
        await redis.aclose()
