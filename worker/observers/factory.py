"""Build the configured Observer from Settings."""

from __future__ import annotations

from urllib.parse import urlsplit

from worker.errors import ConfigError
from worker.observers.protocol import Observer
from worker.settings import Settings

# Small current models; a local OpenAI-compatible server (Ollama, LM Studio, vLLM) names
# its models differently, so with one of those MEMQ_MODEL must be set.
DEFAULT_MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini"}
NO_OBSERVER_MESSAGE = (
    "no observer configured: set ANTHROPIC_API_KEY, or OPENAI_BASE_URL and/or OPENAI_API_KEY "
    "(any OpenAI-compatible server works, e.g. Ollama at http://localhost:11434/v1), "
    "plus MEMQ_MODEL to choose the model"
)


def checked_base_url(variable: str, url: str | None) -> str | None:
    """An observer base URL the SDKs can use; ConfigError naming the problem, never a secret."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{variable} must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        # The SDKs would send the credentials nowhere useful and log the URL in errors.
        raise ConfigError(
            f"{variable} must not carry user:password@ credentials: set the API key variable"
        )
    return url


def build_observer(settings: Settings) -> Observer:
    """The Observer for `settings.observer_provider`; ConfigError when none is configured."""
    provider = settings.observer_provider
    if provider is None:
        raise ConfigError(NO_OBSERVER_MESSAGE)
    model = settings.model or DEFAULT_MODELS[provider]
    if provider == "anthropic":
        if settings.anthropic_api_key is None:
            raise ConfigError("MEMQ_OBSERVER=anthropic needs ANTHROPIC_API_KEY")
        # The SDKs take seconds to import: only after the configuration checks out.
        from worker.observers.anthropic import AnthropicObserver

        return AnthropicObserver(
            api_key=settings.anthropic_api_key.reveal(),
            base_url=checked_base_url("ANTHROPIC_BASE_URL", settings.anthropic_base_url),
            model=model,
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            timeout_s=settings.observer_timeout_s,
            max_reply_bytes=settings.observer_max_reply_bytes,
        )
    from worker.observers.openai import OpenAIObserver

    key = settings.openai_api_key
    return OpenAIObserver(
        api_key=key.reveal() if key is not None else None,
        base_url=checked_base_url("OPENAI_BASE_URL", settings.openai_base_url),
        model=model,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        timeout_s=settings.observer_timeout_s,
        max_reply_bytes=settings.observer_max_reply_bytes,
    )
