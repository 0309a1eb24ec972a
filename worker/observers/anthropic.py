"""The Anthropic Messages API observer: one request per turn, SDK errors mapped to ours."""

from __future__ import annotations

import anthropic
import msgspec

from worker.observers.errors import (
    body_text,
)
from worker.observers.protocol import ObserverReply, ObserverRequest, Usage
from worker.observers.sdk import SdkEndpoint

PROVIDER = "anthropic"
_KEY_VARIABLE = "ANTHROPIC_API_KEY"
_PATH = "/v1/messages"


class _CacheControl(msgspec.Struct):
    type: str = "ephemeral"


class _TextBlock(msgspec.Struct, omit_defaults=True):
    type: str  # always "text"; no default, or omit_defaults would leave it out
    text: str
    cache_control: _CacheControl | None = None


class _Message(msgspec.Struct):
    role: str
    content: str | list[_TextBlock]


class _Request(msgspec.Struct):
    """The Messages API request body memq sends."""

    model: str
    max_tokens: int
    system: list[_TextBlock]
    messages: list[_Message]


_ENCODER = msgspec.json.Encoder()


class _ReplyBlock(msgspec.Struct):
    type: str
    text: str = ""


class _Usage(msgspec.Struct):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _Reply(msgspec.Struct):
    """The fields of a Messages API reply that memq reads."""

    content: list[_ReplyBlock]
    usage: _Usage = msgspec.field(default_factory=_Usage)
    model: str | None = None


_DECODER = msgspec.json.Decoder(_Reply)


class AnthropicObserver:
    """An Observer on Anthropic's Messages API; the SDK never retries (the job does)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        model: str,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
    ) -> None:
        client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout_s,
            # The SDK's aiohttp transport (its `aiohttp` extra) costs half the CPU per call of
            # the default httpx one: ~0.7 ms instead of ~1.3, a third of a small turn's cost.
            http_client=anthropic.DefaultAioHttpClient(),
        )
        self._endpoint = SdkEndpoint(
            client, anthropic, path=_PATH, api="Messages", provider=PROVIDER,
            key_variable=_KEY_VARIABLE, timeout_s=timeout_s, status_detail=_status_detail,
        )  # fmt: skip
        self._model = model
        self._max_tokens = max_tokens
        # API version 2026-10-21 (sent by SDK 2.x) rejects any sampling parameter with a 400,
        # so temperature is accepted for a uniform constructor and never sent.
        del temperature

    @property
    def provider(self) -> str:
        """Always "anthropic"."""
        return PROVIDER

    @property
    def model(self) -> str:
        """The model every call asks for."""
        return self._model

    async def complete(self, request: ObserverRequest) -> ObserverReply:
        """Send the system prompt (cached), the history and this turn; return the reply text."""
        message, latency_ms = await self._endpoint.post(
            _ENCODER.encode(
                _Request(
                    model=self._model,
                    max_tokens=self._max_tokens,
                    system=[_text_block(request.system, cache=True)],
                    messages=_messages(request),
                )
            ),
            _DECODER,
        )
        text = "\n".join(b.text for b in message.content if b.type == "text")
        u = message.usage
        cache_read = u.cache_read_input_tokens or 0
        cache_write = u.cache_creation_input_tokens or 0
        usage = Usage(
            input_tokens=u.input_tokens + cache_write + cache_read,
            cached_input_tokens=cache_read,
            output_tokens=u.output_tokens,
        )
        return ObserverReply(
            text=text,
            usage=usage,
            model=message.model or self._model,
            provider=PROVIDER,
            latency_ms=latency_ms,
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP client."""
        await self._endpoint.aclose()


def _messages(request: ObserverRequest) -> list[_Message]:
    # The API rejects empty text blocks, so a turn with a blank side (an empty "skip" reply)
    # is left out whole; that also keeps the roles alternating.
    turns = [t for t in request.history if t.user.strip() and t.assistant.strip()]
    messages: list[_Message] = []
    for i, turn in enumerate(turns):
        # A cache breakpoint after the newest earlier reply lets the next call reuse the
        # whole stable prefix (system prompt plus history), not just the system prompt.
        last = i == len(turns) - 1
        messages.append(_Message(role="user", content=turn.user))
        messages.append(_Message(role="assistant", content=[_text_block(turn.assistant, last)]))
    messages.append(_Message(role="user", content=request.user))
    return messages


def _text_block(text: str, cache: bool) -> _TextBlock:
    return _TextBlock(type="text", text=text, cache_control=_CacheControl() if cache else None)


def _status_detail(e: anthropic.APIStatusError) -> tuple[str, str | None]:
    return e.api_message or body_text(e.body) or e.message, e.error_code
