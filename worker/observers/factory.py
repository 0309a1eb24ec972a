"""Build the configured Observer from Settings."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

import msgspec

from worker.errors import ConfigError
from worker.observers.protocol import Observer
from worker.settings import Settings

logger = logging.getLogger(__name__)

# Small current models; a local OpenAI-compatible server (Ollama, LM Studio, vLLM) names
# its models differently, so with one of those MEMQ_MODEL must be set.
DEFAULT_MODELS = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-4o-mini",
    "claude-code": "claude-haiku-4-5",
}
NO_OBSERVER_MESSAGE = (
    "no observer configured: log in to Claude Code (run `claude`; `memq up` then uses it, "
    "or set MEMQ_OBSERVER=claude-code), or set ANTHROPIC_API_KEY, or OPENAI_BASE_URL and/or "
    "OPENAI_API_KEY (any OpenAI-compatible server works, e.g. Ollama at "
    "http://localhost:11434/v1); MEMQ_MODEL chooses the model"
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
    if provider == "claude-code":
        from worker.observers.claude_code import ClaudeCodeObserver
        from worker.observers.claude_code_cli import cli_path

        if settings.history_turns:
            logger.warning(
                "MEMQ_HISTORY_TURNS=%d is ignored with MEMQ_OBSERVER=claude-code: each turn "
                "sends the system prompt and this turn's message only",
                settings.history_turns,
            )

        # The CLI authenticates as the user's `claude` does; a key or base URL in memq's own
        # settings (file or environment) is passed on, never stored.
        environ = dict(os.environ)
        if settings.anthropic_api_key is not None:
            environ["ANTHROPIC_API_KEY"] = settings.anthropic_api_key.reveal()
        if settings.anthropic_base_url is not None:
            environ["ANTHROPIC_BASE_URL"] = settings.anthropic_base_url
        return ClaudeCodeObserver(
            model=model,
            cli=cli_path(settings.claude_code_cli),
            data_dir=settings.data_path,
            max_tokens=settings.max_tokens,
            timeout_s=settings.observer_timeout_s,
            warm=settings.claude_code_warm,
            environ=environ,
            max_reply_bytes=settings.observer_max_reply_bytes,
        )
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


async def with_default_observer(
    settings: Settings, environ: Mapping[str, str]
) -> tuple[Settings, str]:
    """`settings` with MEMQ_OBSERVER=claude-code when none is configured and Claude Code's
    login is usable (its `claude auth status`), and the line that says so; else ConfigError."""
    from worker.observers.claude_code_cli import cli_path, login_status

    cli = cli_path(settings.claude_code_cli)
    status = await login_status(cli, environ) if cli is not None else None
    if status is None or not status.logged_in:
        raise ConfigError(NO_OBSERVER_MESSAGE)
    how = status.auth_method.replace("_", " ")
    line = (
        f"memq: no observer configured; Claude Code is logged in ({how}), so the observer is "
        "claude-code (set MEMQ_OBSERVER to choose another)"
    )
    return msgspec.structs.replace(settings, observer="claude-code"), line
