"""What every agent's hook reader shares: the payload decoder, its error, the hook it reads."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Generic, NamedTuple, Protocol, TypeVar

import msgspec

from pipeline.events import Event

SESSION_START = "SessionStart"
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[^\s{}]+$")]
"""An agent's session id: it becomes the memory session (no whitespace, no braces)."""


class HookPayloadError(Exception):
    """The hook payload is not usable (bad JSON, a missing or wrong-typed field)."""


P = TypeVar("P")


class PayloadDecoder(Generic[P]):
    """Decodes one agent's hook payload; HookPayloadError with a one-line reason when unusable."""

    def __init__(self, payload_type: type[P], what: str) -> None:
        self._decoder = msgspec.json.Decoder(payload_type)
        self._what = what

    def __call__(self, raw: bytes) -> P:
        try:
            return self._decoder.decode(raw)
        except msgspec.DecodeError as e:
            raise HookPayloadError(f"bad {self._what}: {e}") from e


class AgentHook(NamedTuple):
    """One hook input read: what it stands for, before preparation (redaction, caps)."""

    session_start: bool
    """The agent is starting a session: the hook answers with the project's context."""
    cwd: str
    project: str
    events: list[Event]
    resend: list[Event] = []  # noqa: RUF012 (a NamedTuple default, never mutated)
    """Calls that may already have been published by their own hooks (read back from the
    agent's transcript): published only where Redis has not seen their event id."""


class HookReader(Protocol):
    """Decode one hook input of an agent; HookPayloadError with a one-line reason."""

    def __call__(
        self, raw: bytes, *, project_of: Callable[[str], str], host: str, now: datetime
    ) -> AgentHook: ...
