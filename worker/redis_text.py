"""Redis replies as text: redis-py hands back bytes (memq reads raw event bytes too)."""

from __future__ import annotations


def as_text(value: object) -> str:
    """A reply value as str: bytes decoded as UTF-8, anything else through str()."""
    return value.decode() if isinstance(value, bytes) else str(value)
