"""Configured secrets masked in any text that leaves the process (logs, dead letters, Redis)."""

from __future__ import annotations

from collections.abc import Iterable

MASK = "***"
# Shorter values are not masked: a 1-character "key" would mask every such letter.
_MIN_SECRET_CHARS = 8


def mask_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every occurrence of each secret (≥ 8 characters) replaced by `***`."""
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_CHARS}, key=len,
                         reverse=True):  # fmt: skip
        text = text.replace(secret, MASK)
    return text
