"""The Anthropic Messages API observer: one request per turn, SDK errors mapped to ours."""

from __future__ import annotations

import anthropic
import msgspec

from worker.observers.errors import body_text
from worker.observers.protocol import ObserverRequest, Usage
from worker.observers.sdk import SdkApi, SdkObserver

PROVIDER = "anthropic"


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


def _status_detail(e: anthropic.APIStatusError) -> tuple[str, str | None]:
    return e.api_message or body_text(e.body) or e.message, e.error_code


class AnthropicObserver(SdkObserver[_Reply]):
    """An Observer on Anthropic's Messages API."""

    _api = SdkApi(
        sdk=anthropic, client=anthropic.AsyncAnthropic, provider=PROVIDER, name="Messages",
        path="/v1/messages", key_variable="ANTHROPIC_API_KEY", status_detail=_status_detail,
    )  # fmt: skip
    _decoder = msgspec.json.Decoder(_Reply)

    def _request_body(self, request: ObserverRequest) -> _Request:
        """The system prompt (cached), the history and this turn."""
        # API version 2026-10-21 (sent by SDK 2.x) rejects any sampling parameter with a 400,
        # so the temperature setting is never sent.
        return _Request(
            model=self._model,
            max_tokens=self._max_tokens,
            system=[_text_block(request.system, cache=True)],
            messages=_messages(request),
        )

    def _text(self, reply: _Reply) -> str:
        """The text blocks, joined by newlines."""
        return "\n".join(b.text for b in reply.content if b.type == "text")

    def _usage(self, reply: _Reply) -> Usage:
        """Input counts the cache reads and writes, which the API reports apart."""
        u = reply.usage
        cache_read = u.cache_read_input_tokens or 0
        cache_write = u.cache_creation_input_tokens or 0
        return Usage(
            input_tokens=u.input_tokens + cache_write + cache_read,
            cached_input_tokens=cache_read,
            output_tokens=u.output_tokens,
        )


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
