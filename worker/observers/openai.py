"""The OpenAI-compatible Chat Completions observer (OpenAI, Ollama, LM Studio, vLLM, gateways)."""

from __future__ import annotations

import msgspec
import openai

from worker.observers.errors import (
    body_text,
)
from worker.observers.protocol import ObserverReply, ObserverRequest, Usage
from worker.observers.sdk import SdkEndpoint

PROVIDER = "openai"
_KEY_VARIABLE = "OPENAI_API_KEY"
# Local servers ignore the key, but the SDK refuses to start without one.
_PLACEHOLDER_KEY = "not-needed"
_PATH = "/chat/completions"


class _ChatMessage(msgspec.Struct):
    role: str
    content: str


class _Request(msgspec.Struct):
    """The Chat Completions request body memq sends."""

    model: str
    max_tokens: int  # not max_completion_tokens: every compatible server knows this one
    temperature: float
    messages: list[_ChatMessage]


_ENCODER = msgspec.json.Encoder()


class _ReplyMessage(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    message: _ReplyMessage = msgspec.field(default_factory=_ReplyMessage)


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: _PromptDetails | None = None


class _Completion(msgspec.Struct):
    """The fields of a Chat Completions reply that memq reads."""

    choices: list[_Choice]
    usage: _Usage | None = None
    model: str | None = None


_DECODER = msgspec.json.Decoder(_Completion)


class OpenAIObserver:
    """An Observer on any Chat Completions endpoint; the SDK never retries (the job does)."""

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        model: str,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
    ) -> None:
        client = openai.AsyncOpenAI(
            api_key=api_key or _PLACEHOLDER_KEY,
            base_url=base_url,
            max_retries=0,
            timeout=timeout_s,
            # The SDK's aiohttp transport: half the CPU per call of the default httpx one.
            http_client=openai.DefaultAioHttpClient(),
        )
        self._endpoint = SdkEndpoint(
            client, openai, path=_PATH, api="Chat Completions", provider=PROVIDER,
            key_variable=_KEY_VARIABLE, timeout_s=timeout_s, status_detail=_status_detail,
        )  # fmt: skip
        self._model = model
        self._max_tokens = max_tokens
        self._temperature = temperature

    @property
    def provider(self) -> str:
        """Always "openai" (also for OpenAI-compatible local servers)."""
        return PROVIDER

    @property
    def model(self) -> str:
        """The model every call asks for."""
        return self._model

    async def complete(self, request: ObserverRequest) -> ObserverReply:
        """Send the system message, the history and this turn; return the reply text."""
        completion, latency_ms = await self._endpoint.post(
            _ENCODER.encode(
                _Request(
                    model=self._model,
                    max_tokens=self._max_tokens,
                    temperature=self._temperature,
                    messages=_messages(request),
                )
            ),
            _DECODER,
        )
        text = ""
        if completion.choices:
            text = completion.choices[0].message.content or ""
        usage = Usage()
        if (u := completion.usage) is not None:
            details = u.prompt_tokens_details
            usage = Usage(
                input_tokens=u.prompt_tokens,
                cached_input_tokens=(details.cached_tokens or 0) if details else 0,
                output_tokens=u.completion_tokens,
            )
        return ObserverReply(
            text=text,
            usage=usage,
            model=completion.model or self._model,
            provider=PROVIDER,
            latency_ms=latency_ms,
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP client."""
        await self._endpoint.aclose()


def _messages(request: ObserverRequest) -> list[_ChatMessage]:
    messages = [_ChatMessage(role="system", content=request.system)]
    for turn in request.history:
        messages.append(_ChatMessage(role="user", content=turn.user))
        messages.append(_ChatMessage(role="assistant", content=turn.assistant))
    messages.append(_ChatMessage(role="user", content=request.user))
    return messages


def _status_detail(e: openai.APIStatusError) -> tuple[str, str | None]:
    # The SDK unwraps {"error": {...}} into e.body; e.code and e.type come from it.
    body = e.body
    message = body.get("message") if isinstance(body, dict) else body_text(body)
    return (message if isinstance(message, str) and message.strip() else e.message), e.code
