"""Records of the read side built on storage: the vector queue, full-text hits, timelines."""

from __future__ import annotations

from typing import Literal

import msgspec

from worker.storage.records import StoredRow

RowKind = Literal["observation", "summary"]
# Each kind's table, in the order the kinds are read and written.
TABLE_OF: dict[RowKind, str] = {"observation": "observations", "summary": "summaries"}


class VectorJob(msgspec.Struct, frozen=True, kw_only=True):
    """A claimed vector-queue row: the stored row to index (None when the row no longer exists)."""

    kind: RowKind
    id: int
    attempts: int
    row: StoredRow | None


class VectorRetry(msgspec.Struct, frozen=True, kw_only=True):
    """A vector-queue row to try again at `next_attempt_at_ms` (epoch ms)."""

    kind: RowKind
    id: int
    next_attempt_at_ms: int


class TextFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Restrictions shared by the full-text and vector legs of a search."""

    project: str | None = None
    type: str | None = None
    """An observation type; summaries match only `summary`."""
    since_ms: int | None = None


class TextHit(msgspec.Struct, frozen=True, kw_only=True):
    """A full-text match: bm25 score (lower is better, as SQLite gives it) and a snippet."""

    kind: RowKind
    id: int
    bm25: float
    snippet: str


class TimelineEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a session in time order: a user prompt, an observation or a summary."""

    kind: Literal["prompt", "observation", "summary"]
    id: int
    created_at: str
    prompt_number: int | None
    prompt_text: str | None = None
    row: StoredRow | None = None


class ReindexStart(msgspec.Struct, frozen=True, kw_only=True):
    """Whether `memq reindex` resumed an unfinished run, and how many rows it has to index."""

    resumed: bool
    pending: int
