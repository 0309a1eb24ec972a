"""Configured secrets masked in text and in log records."""

from __future__ import annotations

import logging
from io import StringIO

from worker.cli.exits import configured_secrets
from worker.masked_text import mask_log_secrets, mask_secrets
from worker.settings import load_settings


def test_every_secret_is_masked_longest_first_and_short_values_are_left() -> None:
    text = "key sk-live-abcdef123456 and sk-live-abcdef123456-x, short abc"
    masked = mask_secrets(text, ["sk-live-abcdef123456-x", "sk-live-abcdef123456", "abc", None])
    assert masked == "key *** and ***, short abc"


def test_log_handlers_mask_each_configured_secret() -> None:
    settings = load_settings({
        "ANTHROPIC_API_KEY": "sk-ant-0123456789abcdef",
        "MEMQ_TELEGRAM_TOKEN": "123456:telegram-token-value",
    })  # fmt: skip
    out = StringIO()
    handler = logging.StreamHandler(out)
    mask_log_secrets([handler], configured_secrets(settings))
    log = logging.getLogger("tests.masked_text")
    log.addHandler(handler)
    try:
        log.warning("echoed: x-api-key: %s", "sk-ant-0123456789abcdef")
        log.warning("url %s", "/bot123456%3Atelegram-token-value/getMe")  # URL-quoted
    finally:
        log.removeHandler(handler)
    text = out.getvalue()
    assert "sk-ant-0123456789abcdef" not in text
    assert "telegram-token-value" not in text
    assert text.count("***") == 2
