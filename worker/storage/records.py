"""The records the worker writes in one batch, and the rows storage hands back."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec


class ObservationRecord(msgspec.Struct, frozen=True, kw_only=True):
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


class SummaryRecord(msgspec.Struct, frozen=True, kw_only=True):
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


class PromptRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A user request seen in the session (from a `prompt` event)."""

    memory_session_id: str
    project: str
    prompt_number: int
    prompt_text: str
    created_at: datetime
    event_id: str


class PromptRow(msgspec.Struct, frozen=True, kw_only=True):
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


class BatchWrite(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one observer turn produced, written in one transaction.

    `fence` is the session lease's fencing token: a write carrying a token lower than one
    already seen for the session comes from a stale lease holder and is refused.
    `event_ids` are marked processed, so a replay after a crash skips them.
    """

    memory_session_id: str
    project: str
    fence: int
    event_ids: list[str]
    prompts: list[PromptRecord] = []
    observations: list[ObservationRecord] = []
    summaries: list[SummaryRecord] = []
    dropped: list[DroppedOutput] = []
    usage: list[TokenUsage] = []
    ended: bool = False
    occurred_at: datetime | None = None
    """The session activity time to record; None = now (set by imports of old sessions)."""


class StoredRow(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=False):
    """A stored observation or summary: the broadcast/feed payload and the CLI's JSON row."""

    kind: Literal["observation", "summary"]
    id: int
    memory_session_id: str
    project: str
    created_at: str
    prompt_number: int | None = None
    # observation fields
    type: str | None = None
    title: str | None = None
    subtitle: str | None = None
    facts: list[str] | None = None
    narrative: str | None = None
    concepts: list[str] | None = None
    files_read: list[str] | None = None
    files_modified: list[str] | None = None
    file_hashes: dict[str, str | None] | None = None
    stale_files: list[str] | None = None
    """Set by the read surfaces on the agent host (worker/search/freshness.py)."""
    # summary fields
    request: str | None = None
    investigated: str | None = None
    learned: str | None = None
    completed: str | None = None
    next_steps: str | None = None
    notes: str | None = None


class BatchResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a batch write did: the new rows (to announce) and how many were duplicates."""

    stored: list[StoredRow]
    deduplicated: int


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One memory session as `memq sessions` lists it."""

    memory_session_id: str
    project: str
    started_at: str
    last_activity_at: str
    ended_at: str | None
    prompts: int
    observations: int
    summaries: int


class DroppedRow(msgspec.Struct, frozen=True, kw_only=True):
    """A kept dropped reply, as `memq dlq list` shows it."""

    id: int
    memory_session_id: str
    project: str
    category: str
    raw: str
    event_ids: list[str]
    created_at: str
    reason: str | None
    turn_kind: str
    replayed_at: str | None


class StoreCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Row counts and token totals for `memq stats`."""

    sessions: int
    observations: int
    summaries: int
    prompts: int
    dropped_outputs: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
