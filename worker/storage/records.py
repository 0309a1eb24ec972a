"""The batch the worker writes and the rows storage hands back (a turn's rows: pipeline)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from pipeline.records import (
    DroppedOutput,
    ObservationRow,
    PromptRow,
    StoredPrompt,
    SummaryRow,
    TokenUsage,
    TurnRows,
)

__all__ = [
    "BatchResult",
    "BatchWrite",
    "DroppedOutput",
    "DroppedRow",
    "ObservationRow",
    "PromptRow",
    "SessionRow",
    "StoreCounts",
    "StoredPrompt",
    "StoredRow",
    "SummaryRow",
    "TokenUsage",
]


class BatchWrite(TurnRows, frozen=True, kw_only=True):
    """Everything one observer turn produced (its TurnRows), written in one transaction.

    `fence` is the session lease's fencing token: a write carrying a token lower than one
    already seen for the session comes from a stale lease holder and is refused.
    `event_ids` are marked processed, so a replay after a crash skips them.
    """

    memory_session_id: str
    project: str
    fence: int
    event_ids: list[str]
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


class CostDay(msgspec.Struct, frozen=True, kw_only=True):
    """One project's observer spend on one UTC day: tokens, calls, observations stored."""

    project: str
    day: str  # YYYY-MM-DD, UTC
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    observations: int = 0
    reported_cost_usd: float | None = None  # the providers' own figure, where they give one
