"""Configured secrets masked in any text that leaves the process (logs, dead letters, Redis)."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable
from urllib.parse import quote

MASK = "***"
# Shorter values are not masked: a 1-character "key" would mask every such letter.
_MIN_SECRET_CHARS = 8


def mask_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every occurrence of each secret (≥ 8 characters) replaced by `***`."""
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS}, key=len,
                         reverse=True):  # fmt: skip
        text = text.replace(secret, MASK)
    return text


def mask_token(text: str, token: str) -> str:
    """`text` with the token (plain or URL-quoted) as `***`: `/bot<token>/` → `/bot***/`."""
    if not token:
        return text
    return text.replace(token, "***").replace(quote(token, safe=""), "***")


class TokenMask(logging.Filter):
    """Masks one secret in every record a handler writes (a bot token in Bot API URLs, an API key
    a provider echoed)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self._quoted = quote(token, safe="")

    def _holds(self, text: str) -> bool:
        return self.token in text or self._quoted in text  # a URL quotes the `:` as %3A

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.token:
            return True
        message = record.getMessage()
        if self._holds(message):
            record.msg, record.args = mask_token(message, self.token), ()
        for name, value in list(vars(record).items()):
            if name != "msg" and isinstance(value, str) and self._holds(value):
                setattr(record, name, mask_token(value, self.token))
        if record.exc_info and record.exc_info[1] is not None:
            text = "".join(traceback.format_exception(record.exc_info[1]))
            if self._holds(text):  # the formatters print exc_info as is: show a masked copy
                record.exc_info = None
                setattr(record, "exc", mask_token(text, self.token))  # noqa: B010
        return True


def mask_log_secrets(handlers: Iterable[logging.Handler], secrets: Iterable[str | None]) -> None:
    """Mask each configured secret (≥ 8 characters) in every record these handlers write."""
    for secret in {s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS}:
        for handler in handlers:
            handler.addFilter(TokenMask(secret))
