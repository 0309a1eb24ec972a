"""Observer providers (Anthropic Messages, OpenAI-compatible Chat Completions, Claude Code),
one protocol.

Each public name loads its module on first use (PEP 562), as in `pipeline`: the SDKs take
seconds to import, so `worker.observers.protocol` and the errors must not pull them in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same names, for type checkers
    from pipeline.prompting.conversation import Exchange
    from worker.observers.anthropic import AnthropicObserver
    from worker.observers.claude_code import ClaudeCodeObserver
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

# The public API, each name under the module that defines it.
_HOME = {
    "AnthropicObserver": "worker.observers.anthropic",
    "ClaudeCodeObserver": "worker.observers.claude_code",
    "Exchange": "pipeline.prompting.conversation",
    "Observer": "worker.observers.protocol",
    "ObserverAuthError": "worker.observers.errors",
    "ObserverError": "worker.observers.errors",
    "ObserverPermanentError": "worker.observers.errors",
    "ObserverQuotaError": "worker.observers.errors",
    "ObserverReply": "worker.observers.protocol",
    "ObserverRequest": "worker.observers.protocol",
    "ObserverTransientError": "worker.observers.errors",
    "OpenAIObserver": "worker.observers.openai",
    "Usage": "worker.observers.protocol",
    "build_observer": "worker.observers.factory",
}

__all__ = [
    "AnthropicObserver",
    "ClaudeCodeObserver",
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


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'worker.observers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
