"""The Observer protocol every provider adapter implements, and its request/reply records."""

from __future__ import annotations

from typing import Protocol

import msgspec

from pipeline.prompting.conversation import Exchange


class ObserverRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one observer call sends: system prompt, bounded history, this turn's message."""

    system: str  # the init or continuation prompt: stable across turns, so providers cache it
    history: list[Exchange]  # earlier turns, oldest first, already bounded by the caller
    user: str


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token counts of one call; input includes the cached part."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # what the provider says the call cost (claude-code does)


class ObserverReply(msgspec.Struct, frozen=True, kw_only=True):
    """The observer's text for one call, with what it cost and how long it took."""

    text: str
    usage: Usage
    model: str
    provider: str
    latency_ms: float


class Observer(Protocol):
    """An LLM that reads framed tool calls and answers with XML; one adapter per provider."""

    @property
    def provider(self) -> str:
        """The provider id: "anthropic", "openai" or "claude-code"."""

    @property
    def model(self) -> str:
        """The model every call asks for."""

    async def complete(self, request: ObserverRequest) -> ObserverReply:
        """Send one turn; raises an ObserverError subclass on any failure."""

    async def aclose(self) -> None:
        """Close the HTTP client (or stop the CLI processes)."""
