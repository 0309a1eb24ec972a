"""What one Claude Code turn answered, and its failures as memq's observer errors.

The CLI reports an API failure as a synthetic assistant message whose `error` names the kind
(authentication_failed, billing_error, rate_limit, invalid_request, server_error, unknown)
and whose text is the CLI's one line ("Not logged in · Please run /login", "API Error: …").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from claude_agent_sdk import ResultMessage

from pipeline.replies.classify import classify_observer_output, quota_reset_hint
from worker.observers.errors import (
    ObserverAuthError,
    ObserverError,
    ObserverPermanentError,
    ObserverQuotaError,
    ObserverTransientError,
)
from worker.observers.protocol import Usage

PROVIDER = "claude-code"
LOGIN_HINT = "run `claude` and log in (or set ANTHROPIC_API_KEY)"
# "resets 5pm", "resets at 5:30 pm (Europe/London)", "resets 17:00 (UTC)"
_CLOCK = re.compile(
    r"\bresets?\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?(?:\s*\(([\w/+-]+)\))?", re.I
)
_EPOCH_MIN = 1_000_000_000


@dataclass
class Turn:
    """One turn as the CLI reported it."""

    text: str = ""
    model: str | None = None
    error: str | None = None  # the assistant message's error kind
    error_text: str = ""
    is_error: bool = False  # the result says the turn failed
    status: int | None = None  # the failing API call's HTTP status
    result_text: str = ""
    subtype: str = ""
    usage: Usage = field(default_factory=Usage)
    finished: bool = False  # the turn's result arrived

    def read_result(self, result: ResultMessage) -> None:
        """Take the result's usage, cost and failure, if any."""
        self.finished = True
        self.usage = usage_of(result.usage, result.total_cost_usd)
        self.is_error = result.is_error
        self.status = result.api_error_status
        self.result_text = result.result or ""
        self.subtype = result.subtype
        if result.is_error and self.error is None:
            self.error = "unknown"

    @property
    def message(self) -> str:
        """The CLI's own words for the failure, on one line."""
        words = self.error_text or self.result_text or self.subtype or "no detail"
        return " ".join(words.split())[:300]


def usage_of(usage: dict[str, Any] | None, cost_usd: float | None) -> Usage:
    """The result's token counts (input including cache reads and writes) and its cost."""
    u = usage or {}

    def count(key: str) -> int:
        value = u.get(key)
        return value if isinstance(value, int) else 0

    cache_read = count("cache_read_input_tokens")
    return Usage(
        input_tokens=count("input_tokens") + count("cache_creation_input_tokens") + cache_read,
        cached_input_tokens=cache_read,
        output_tokens=count("output_tokens"),
        cost_usd=cost_usd,
    )


def failed_turn(turn: Turn, now: datetime | None = None) -> ObserverError:
    """The observer error a failed turn stands for."""
    status = f" (HTTP {turn.status})" if turn.status else ""
    message = f"{PROVIDER} observer: {turn.message}{status}"
    kind = turn.error
    if kind == "authentication_failed" or turn.status in (401, 403):
        return ObserverAuthError(f"{message}: {LOGIN_HINT}")
    says_quota = classify_observer_output(turn.message) == "quota"
    if kind == "billing_error" or turn.status == 402 or says_quota:
        return ObserverQuotaError(message, quota_reset_s(turn.message, now or datetime.now(UTC)))
    if kind == "invalid_request":
        return ObserverPermanentError(message)
    return ObserverTransientError(message)


def quota_reset_s(text: str, now: datetime) -> float | None:
    """Seconds until the reset a quota line names (a Unix time, or a clock time), or None."""
    hint = quota_reset_hint(text)
    if hint is not None and hint.isdigit() and int(hint) >= _EPOCH_MIN:
        return max(1.0, int(hint) - now.timestamp())
    match = _CLOCK.search(text)
    if match is None:
        return None
    hour, minute, half, zone = match.groups()
    h, m = int(hour), int(minute or 0)
    if half:
        h = h % 12 + (12 if half.lower() == "pm" else 0)
    if h > 23 or m > 59:
        return None
    try:
        tz = ZoneInfo(zone) if zone else UTC
    except (ZoneInfoNotFoundError, ValueError):
        tz = UTC
    local = now.astimezone(tz)
    reset = local.replace(hour=h, minute=m, second=0, microsecond=0)
    if reset <= local:
        reset += timedelta(days=1)
    return (reset - local).total_seconds()
