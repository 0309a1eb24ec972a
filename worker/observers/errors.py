"""The observer error taxonomy and the HTTP-status/header classification both adapters share."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import msgspec

from worker.errors import WorkerError

T = TypeVar("T")

# Quota and credit wording seen in Anthropic, OpenAI and OpenAI-compatible gateways' bodies.
# Not "billing" alone: OpenAI's per-minute rate-limit message links to the billing page.
_QUOTA_WORDS = re.compile(
    r"insufficient[_ ]quota|quota[_ ](?:exceeded|exhausted)|exceeded (?:your |the )?"
    r"(?:current )?quota|usage limit|credit balance|insufficient[_ ](?:credits|funds)"
    r"|spend(?:ing)? limit",
    re.IGNORECASE,
)
_QUOTA_STATUSES = frozenset({400, 403, 429})
_QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "billing_error",
        "billing_hard_limit_reached",
        "billing_not_active",
        "quota_exceeded",
    }
)
_TRANSIENT_4XX = frozenset({408, 409, 429})
_RESET_HEADER = re.compile(r"^(anthropic-ratelimit-[a-z-]+|x-ratelimit)-reset(-[a-z-]+)?$")
# OpenAI's x-ratelimit-reset-* values are Go durations such as "6m0s", "1s" or "20ms".
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|h|m|s))+")
_DURATION_UNITS_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_MAX_MESSAGE_CHARS = 300
_EPOCH_THRESHOLD_S = 1e9  # a "delay" this long is a Unix time (2001 onwards)
_MARKUP = re.compile(r"<[^>]*>")


class ObserverError(WorkerError):
    """Base class of every error an observer provider raises."""


class ObserverTransientError(ObserverError):
    """A failure worth retrying later: timeout, connection error, rate limit, 408/409/5xx."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ObserverQuotaError(ObserverError):
    """The account is out of quota or credit: pause the provider until the reset."""

    def __init__(self, message: str, reset_after_s: float | None = None) -> None:
        super().__init__(message)
        self.reset_after_s = reset_after_s


class ObserverAuthError(ObserverError):
    """The API key is missing, invalid or lacks permission."""


class ObserverPermanentError(ObserverError):
    """The request itself is wrong (bad request, unknown model): retrying cannot help."""


class ObserverReplyTooLargeError(ObserverPermanentError):
    """The reply is longer than MEMQ_OBSERVER_MAX_REPLY_BYTES: dropped, not asked again."""

    def __init__(self, message: str, head: str = "") -> None:
        super().__init__(message)
        self.head = head  # the start of the body, for the dropped reply's row


def classify_status(
    provider: str,
    status: int,
    api_message: str,
    *,
    headers: Mapping[str, str],
    error_type: str | None = None,
    error_code: str | None = None,
    key_variable: str,
    now: datetime | None = None,
) -> ObserverError:
    """Map an HTTP error reply to the observer error it stands for."""
    kind = " ".join(dict.fromkeys(part for part in (error_type, error_code) if part))
    detail = _one_line(f"{kind}: {api_message}" if kind else api_message) or "no message"
    message = f"{provider} observer: HTTP {status} {detail}"
    codes = {(error_type or "").lower(), (error_code or "").lower()}
    if status == 402 or codes & _QUOTA_CODES:
        return ObserverQuotaError(message, reset_after_s(headers, now=now))
    if status == 401:
        return ObserverAuthError(f"{message} (check {key_variable})")
    if status in _QUOTA_STATUSES and _QUOTA_WORDS.search(api_message):
        return ObserverQuotaError(message, reset_after_s(headers, now=now))
    if status == 403:
        return ObserverAuthError(f"{message} (check {key_variable})")
    if status in _TRANSIENT_4XX or status >= 500:
        return ObserverTransientError(message, retry_after_s(headers, now=now))
    return ObserverPermanentError(message)


def decode_reply(
    decoder: msgspec.json.Decoder[T], body: bytes, *, provider: str, status: int, where: object,
    api: str,
) -> T:  # fmt: skip
    """A successful reply's body decoded; a body that is not the API's reply (a misrouted
    proxy, an HTML page) is an ObserverPermanentError naming the status, server and API."""
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as e:
        raise ObserverPermanentError(
            f"{provider} observer: HTTP {status} reply from {where} is not a {api} response ({e})"
        ) from e


def refused_connection(error: BaseException) -> BaseException | None:
    """The failed connect (refused, unreachable, DNS) behind an SDK error, if that is what it was.

    The SDKs' aiohttp transport reports some failed connects as connect *timeouts*; the cause
    chain still holds the OSError, so the message can say "cannot reach" and not "no reply".
    """
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def body_text(body: object) -> str:
    """The readable text of a non-JSON error body (e.g. a proxy's HTML page), else ""."""
    return _MARKUP.sub(" ", body) if isinstance(body, str) else ""


def retry_after_s(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asks us to wait (`retry-after-ms`, then `retry-after`), or None."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if (ms := _parse_float(lowered.get("retry-after-ms"))) is not None:
        return ms / 1000
    value = lowered.get("retry-after")
    if value is None:
        return None
    if (seconds := _parse_float(value)) is not None:
        return seconds
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return _seconds_until(moment, now)


def reset_after_s(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds until an exhausted limit resets, from retry-after or rate-limit reset headers."""
    if (wait := retry_after_s(headers, now=now)) is not None:
        return wait
    lowered = {k.lower(): v for k, v in headers.items()}
    resets: list[tuple[bool, float]] = []
    for name, value in lowered.items():
        if (match := _RESET_HEADER.match(name)) is None:
            continue
        seconds = _parse_reset(value, now)
        if seconds is not None:
            remaining = lowered.get(f"{match[1]}-remaining{match[2] or ''}")
            resets.append((remaining is not None and remaining.strip() == "0", seconds))
    # The exhausted limits decide; with no `remaining` to tell, the latest reset is the safe one.
    exhausted = [s for spent, s in resets if spent] or [s for _, s in resets]
    return max(exhausted) if exhausted else None


def _parse_reset(value: str, now: datetime | None) -> float | None:
    value = value.strip()
    if (seconds := _parse_float(value)) is not None:
        if seconds <= _EPOCH_THRESHOLD_S:
            return seconds
        # Some reset headers carry a Unix time rather than a delay.
        try:
            return _seconds_until(datetime.fromtimestamp(seconds, UTC), now)
        except (OverflowError, OSError, ValueError):
            return None
    if _DURATION.fullmatch(value):
        return sum(float(n) * _DURATION_UNITS_S[u] for n, u in _DURATION_PART.findall(value))
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return _seconds_until(moment, now)


def _seconds_until(moment: datetime, now: datetime | None) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())


def _parse_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if number >= 0 and number != float("inf") else None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE_CHARS else line[: _MAX_MESSAGE_CHARS - 1] + "…"
