"""Observer providers (Anthropic Messages, OpenAI-compatible Chat Completions), one protocol."""

from pipeline.prompting.conversation import Exchange
from worker.observers.anthropic import AnthropicObserver
from worker.observers.errors import (
    ObserverAuthError,
    ObserverError,
    ObserverPermanentError,
    ObserverQuotaError,
    ObserverTransientError,
)
from worker.observers.factory import build_observer
from worker.observers.openai import OpenAIObserver
from worker.observers.protocol import Observer, ObserverReply, ObserverRequest, Usage

__all__ = [
    "AnthropicObserver",
    "Exchange",
    "Observer",
    "ObserverAuthError",
    "ObserverError",
    "ObserverPermanentError",
    "ObserverQuotaError",
    "ObserverReply",
    "ObserverRequest",
    "ObserverTransientError",
    "OpenAIObserver",
    "Usage",
    "build_observer",
]
