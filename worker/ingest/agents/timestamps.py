"""The agents' own timestamps, read from their transcripts and rollouts."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def aware_timestamp(value: Any) -> datetime | None:
    """An ISO 8601 string with a zone as a datetime; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
