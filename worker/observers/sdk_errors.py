"""The SDKs' errors mapped to ours: `anthropic` and `openai` share one error hierarchy by name."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from worker.observers.errors import (
    ObserverError,
    ObserverPermanentError,
    ObserverTransientError,
    classify_status,
    refused_connection,
)

StatusDetail = Callable[[Any], tuple[str, str | None]]
"""An SDK's APIStatusError → (the server's message, its error code)."""


def map_sdk_error(
    e: Exception,
    sdk: ModuleType,
    *,
    provider: str,
    api: str,
    base_url: object,
    timeout_s: float,
    key_variable: str,
    status_detail: StatusDetail,
) -> ObserverError:
    """One SDK error (`sdk.APIError` and subclasses) as a transient or permanent ObserverError."""
    if isinstance(e, sdk.APIConnectionError) and (refused := refused_connection(e)):
        return ObserverTransientError(f"{provider} observer: cannot reach {base_url}: {refused}")
    if isinstance(e, sdk.APITimeoutError):
        return ObserverTransientError(f"{provider} observer: no reply within {timeout_s:g}s")
    if isinstance(e, sdk.APIConnectionError):
        cause = e.__cause__ or e
        return ObserverTransientError(f"{provider} observer: cannot reach {base_url}: {cause}")
    if isinstance(e, sdk.APIStatusError):
        message, code = status_detail(e)
        return classify_status(
            provider,
            e.status_code,
            message,
            headers=e.response.headers,
            error_type=e.type,
            error_code=code,
            key_variable=key_variable,
        )
    if isinstance(e, sdk.APIResponseValidationError):
        # A 2xx whose body is not the API's reply: whatever answered is not that API.
        return ObserverPermanentError(
            f"{provider} observer: HTTP {e.status_code} reply from {base_url} "
            f"is not a {api} response"
        )
    return ObserverTransientError(f"{provider} observer: {getattr(e, 'message', e)}")
