"""The rows one observer turn writes, and the stored request a new conversation starts from."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec


class ObservationRow(msgspec.Struct, frozen=True, kw_only=True):
    """One parsed observation, ready to insert (deduplicated on its content hash)."""

    memory_session_id: str
    project: str
    type: str
    title: str | None
    subtitle: str | None
    facts: list[str]
    narrative: str | None
    concepts: list[str]
    files_read: list[str]
    files_modified: list[str]
    prompt_number: int | None
    content_hash: str
    created_at: datetime
    model: str | None = None
    type_fallback: bool = False
    source_event_ids: list[str] = []
    file_hashes: dict[str, str | None] = {}
    """Evidence path (relative to the checkout's root when inside it) -> SHA-256 after the
    batch's last call touching it; None when unknown."""


class SummaryRow(msgspec.Struct, frozen=True, kw_only=True):
    """One progress summary (many per session; not deduplicated)."""

    memory_session_id: str
    project: str
    request: str | None
    investigated: str | None
    learned: str | None
    completed: str | None
    next_steps: str | None
    notes: str | None
    prompt_number: int | None
    created_at: datetime
    model: str | None = None


class PromptRow(msgspec.Struct, frozen=True, kw_only=True):
    """A user request seen in the session (from a `prompt` event)."""

    memory_session_id: str
    project: str
    prompt_number: int
    prompt_text: str
    created_at: datetime
    event_id: str


class StoredPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """A stored user request, as a restarted observer conversation needs it."""

    prompt_number: int
    """As published, or (published without one) its position among the session's prompts."""
    prompt_text: str
    created_at: datetime


class DroppedOutput(msgspec.Struct, frozen=True, kw_only=True):
    """A non-XML observer reply kept (truncated) for replay after a parser fix."""

    memory_session_id: str
    project: str
    category: str
    raw: str
    event_ids: list[str]
    created_at: datetime
    reason: str | None = None
    turn_kind: Literal["observation", "summary"] = "observation"


class TokenUsage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens one observer call cost, as the API reported them."""

    memory_session_id: str
    project: str
    provider: str
    model: str
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    created_at: datetime
    cost_usd: float | None = None  # USD, when the provider reports it (claude-code does)


class TurnRows(msgspec.Struct, frozen=True, kw_only=True):
    """What a settled turn writes, in one transaction."""

    prompts: list[PromptRow] = []
    observations: list[ObservationRow] = []
    summaries: list[SummaryRow] = []
    dropped: list[DroppedOutput] = []
    usage: list[TokenUsage] = []
