"""The OpenAI-compatible Chat Completions observer (OpenAI, Ollama, LM Studio, vLLM, gateways)."""

from __future__ import annotations

import msgspec
import openai

from worker.observers.errors import body_text
from worker.observers.protocol import ObserverRequest, Usage
from worker.observers.sdk import SdkApi, SdkObserver

PROVIDER = "openai"


class _ChatMessage(msgspec.Struct):
    role: str
    content: str


class _Request(msgspec.Struct):
    """The Chat Completions request body memq sends."""

    model: str
    max_tokens: int  # not max_completion_tokens: every compatible server knows this one
    temperature: float
    messages: list[_ChatMessage]


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


def _status_detail(e: openai.APIStatusError) -> tuple[str, str | None]:
    # The SDK unwraps {"error": {...}} into e.body; e.code and e.type come from it.
    body = e.body
    message = body.get("message") if isinstance(body, dict) else body_text(body)
    return (message if isinstance(message, str) and message.strip() else e.message), e.code


class OpenAIObserver(SdkObserver[_Completion]):
    """An Observer on any Chat Completions endpoint; its provider is "openai" for them all."""

    _api = SdkApi(
        sdk=openai, client=openai.AsyncOpenAI, provider=PROVIDER, name="Chat Completions",
        path="/chat/completions", key_variable="OPENAI_API_KEY", status_detail=_status_detail,
        # Local servers ignore the key, but the SDK refuses to start without one.
        placeholder_key="not-needed",
    )  # fmt: skip
    _decoder = msgspec.json.Decoder(_Completion)

    def _request_body(self, request: ObserverRequest) -> _Request:
        """The system message, the history and this turn."""
        return _Request(
            model=self._model,
            max_tokens=self._max_tokens,
            temperature=self._temperature,
            messages=_messages(request),
        )

    def _text(self, reply: _Completion) -> str:
        """The first choice's message."""
        return (reply.choices[0].message.content or "") if reply.choices else ""

    def _usage(self, reply: _Completion) -> Usage:
        """Zeros when the server reports none (some local servers)."""
        if (u := reply.usage) is None:
            return Usage()
        details = u.prompt_tokens_details
        return Usage(
            input_tokens=u.prompt_tokens,
            cached_input_tokens=(details.cached_tokens or 0) if details else 0,
            output_tokens=u.completion_tokens,
        )


def _messages(request: ObserverRequest) -> list[_ChatMessage]:
    messages = [_ChatMessage(role="system", content=request.system)]
    for turn in request.history:
        messages.append(_ChatMessage(role="user", content=turn.user))
        messages.append(_ChatMessage(role="assistant", content=turn.assistant))
    messages.append(_ChatMessage(role="user", content=request.user))
    return messages
