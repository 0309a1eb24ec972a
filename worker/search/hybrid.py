"""Hybrid search: SQLite FTS5 (bm25) fused with vector similarity by reciprocal rank fusion."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Literal

import msgspec

from worker.errors import WorkerError
from worker.search.vector_index import VectorIndex, VectorMatch
from worker.storage.index_records import RowKind, TextFilter, TextHit
from worker.storage.protocol import Store
from worker.storage.records import StoredRow

SearchMode = Literal["hybrid", "fts", "vector"]
RowKey = tuple[RowKind, int]
StaleFiles = Callable[[StoredRow], list[str]]
VectorSearch = Callable[[str, int, TextFilter], Awaitable[list[VectorMatch]]]
RRF_K = 60  # the constant of Cormack et al.; damps the weight of the very first ranks
SNIPPET_CHARS = 160
SECOND_DOC_SHARE = 0.25  # measured on bench/retrieval.py: recall@5 0.88 -> 0.92

# Question words and glue: "why did the login test fail" must not demand a row saying "did".
# Quoted phrases keep every word.
_STOPWORD_TEXT = """
a an and are as at be by did do does for from had has have how i in is it its of on or our
so that the this to was we were what when where which who why will with
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_PHRASE_OR_WORD = re.compile(r'"([^"]*)"|(\S+)')
_WORDLIKE = re.compile(r"\w")


class BadQueryError(WorkerError):
    """The query has nothing to search for, or holds what no store can search (a NUL)."""


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """One result, as `memq search --json` prints it."""

    id: int
    kind: RowKind
    type: str | None
    title: str | None
    subtitle: str | None
    project: str
    memory_session_id: str
    created_at: str
    score: float
    snippet: str
    stale_files: list[str] = []
    """Set on the agent host by `search(stale_files=...)` (worker/search/freshness.py)."""


class SearchResult(msgspec.Struct, frozen=True, kw_only=True):
    """The hits, the ranking actually used, and why it differs from the one asked, if it does."""

    hits: list[SearchHit]
    mode: SearchMode
    notice: str | None = None


def row_key(text: str) -> RowKey | None:
    """(kind, id) of an observation id ("12", "observation:12") or a summary ref
    ("summary:12"); None when `text` is neither."""
    kind, _, number = text.rpartition(":")
    if kind not in ("", "observation", "summary") or not number.isdigit():
        return None
    return ("summary" if kind == "summary" else "observation"), int(number)


def ref(key: RowKey) -> str:
    """How ids are shown: 12 for an observation, summary:12 for a summary."""
    return str(key[1]) if key[0] == "observation" else f"summary:{key[1]}"


def since_ms(since: str | None) -> int | None:
    """Milliseconds since the epoch of a YYYY-MM-DD date (UTC unless it says otherwise);
    BadQueryError when it is not a date."""
    if not since:
        return None
    try:
        at = datetime.fromisoformat(since)
    except ValueError:
        raise BadQueryError(f"since {since[:40]!r}: use a date like 2026-11-30") from None
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)


def check_query(query: str) -> None:
    """BadQueryError when `query` holds a NUL: FTS5 ends the text there, PostgreSQL refuses it."""
    if "\x00" in query:
        raise BadQueryError("the query contains a NUL character: remove it")


def match_expression(query: str) -> str:
    """An FTS5 expression where every word and every "quoted phrase" must match.

    Words are quoted (FTS5 syntax in the query is text, not operators); `word*` keeps a
    prefix match; question words are dropped unless nothing else is left.
    """
    check_query(query)
    terms: list[tuple[str, bool]] = []
    for m in _PHRASE_OR_WORD.finditer(query):
        phrase, word = m.group(1), m.group(2)
        if phrase is not None:
            if _WORDLIKE.search(phrase):
                terms.append((f'"{phrase}"', True))
            continue
        prefix = word.endswith("*") and len(word) > 1
        text = word.rstrip("*") if prefix else word
        text = text.replace('"', "")
        if _WORDLIKE.search(text):
            quoted = f'"{text}"' + ("*" if prefix else "")
            terms.append((quoted, text.lower() not in STOPWORDS))
    kept = [t for t, keep in terms if keep] or [t for t, _ in terms]
    if not kept:
        raise BadQueryError(f"nothing to search for in {query!r}: give at least one word")
    return " ".join(kept)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[RowKey]], k: int = RRF_K
) -> list[tuple[RowKey, float]]:
    """Fuse ranked lists: each key scores the sum of 1 / (k + rank) over the lists holding it."""
    scores: dict[RowKey, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0][0], -item[0][1]))


def index_search(index: VectorIndex, timeout_s: float = 10.0) -> VectorSearch:
    """A VectorSearch over a Chroma collection, off the event loop."""

    async def run(text: str, n: int, filters: TextFilter) -> list[VectorMatch]:
        return await asyncio.wait_for(asyncio.to_thread(index.query, text, n, filters), timeout_s)

    return run


async def search(
    store: Store,
    query: str,
    *,
    filters: TextFilter | None = None,
    limit: int = 10,
    mode: SearchMode = "hybrid",
    vectors: VectorSearch | None = None,
    vectors_off_reason: str = "vector index off (MEMQ_CHROMA=off)",
    stale_files: StaleFiles | None = None,
) -> SearchResult:
    """Search stored observations and summaries; keyword-only (saying why) without vectors.

    `stale_files` sets each hit's `stale_files` from its stored row (Freshness.stale_files).
    """
    filters = filters or TextFilter()
    notice: str | None = None
    if mode != "fts" and vectors is not None and (lag := await store.vector_lag()):
        counts = await store.counts()
        if lag >= counts.observations + counts.summaries:
            vectors, vectors_off_reason = None, f"vector index not built yet ({lag} rows wait)"
        else:
            notice = f"vector index {lag} rows behind: the newest rows match by keywords only"
    if mode == "vector":
        if vectors is None:
            return SearchResult(hits=[], mode="vector", notice=vectors_off_reason)
        matches = await vectors(query, max(limit * 8, 50), filters)
        keys, scores, texts = _vector_ranking(matches)
        found = await _hits(store, keys[:limit], scores, texts, stale_files)
        return SearchResult(hits=found, mode="vector", notice=notice)

    text_hits = await store.search_text(match_expression(query), filters, max(limit * 5, 50))
    if mode == "fts":
        return await _keywords_only(store, text_hits, limit, None, stale_files)
    if vectors is None:
        return await _keywords_only(store, text_hits, limit, vectors_off_reason, stale_files)
    try:
        matches = await vectors(query, max(limit * 8, 50), filters)
    except Exception as e:  # Chroma down or slow: the keyword half still answers
        reason = f"vector index unavailable ({type(e).__name__}: {e})"
        return await _keywords_only(store, text_hits, limit, reason, stale_files)
    snippets = {(h.kind, h.id): h.snippet for h in text_hits}
    text_keys = [(h.kind, h.id) for h in text_hits]
    vector_keys, _, vector_texts = _vector_ranking(matches)
    fused = reciprocal_rank_fusion([text_keys, vector_keys])[:limit]
    texts = {**vector_texts, **snippets}
    found = await _hits(store, [k for k, _ in fused], dict(fused), texts, stale_files)
    return SearchResult(hits=found, mode="hybrid", notice=notice)


async def _keywords_only(
    store: Store,
    text_hits: Sequence[TextHit],
    limit: int,
    why_not_hybrid: str | None,
    stale_files: StaleFiles | None,
) -> SearchResult:
    scores = {(h.kind, h.id): round(-h.bm25, 6) for h in text_hits}
    snippets = {(h.kind, h.id): h.snippet for h in text_hits}
    keys = [(h.kind, h.id) for h in text_hits[:limit]]
    found = await _hits(store, keys, scores, snippets, stale_files)
    notice = None if why_not_hybrid is None else f"keyword search only: {why_not_hybrid}"
    return SearchResult(hits=found, mode="fts", notice=notice)


def _vector_ranking(
    matches: Sequence[VectorMatch],
) -> tuple[list[RowKey], dict[RowKey, float], dict[RowKey, str]]:
    """Rows by their best document's similarity plus a share of their second best's.

    A row whose title and narrative both match beats one with a single lucky fact.
    """
    best: dict[RowKey, float] = {}
    second: dict[RowKey, float] = {}
    texts: dict[RowKey, str] = {}
    for m in matches:
        key = (m.kind, m.id)
        if key not in best:
            best[key] = 1.0 - m.distance
            texts[key] = _shorten(m.text)
        elif key not in second:
            second[key] = 1.0 - m.distance
    scores = {k: round(v + SECOND_DOC_SHARE * second.get(k, 0.0), 6) for k, v in best.items()}
    keys = sorted(scores, key=lambda k: -scores[k])
    return keys, scores, texts


async def _hits(
    store: Store,
    keys: Sequence[RowKey],
    scores: dict[RowKey, float],
    snippets: dict[RowKey, str],
    stale_files: StaleFiles | None,
) -> list[SearchHit]:
    rows = await store.rows_by_keys(keys)
    return [
        _hit(r, scores.get((r.kind, r.id), 0.0), snippets.get((r.kind, r.id)), stale_files)
        for r in rows
    ]


def _hit(
    row: StoredRow, score: float, snippet: str | None, stale_files: StaleFiles | None
) -> SearchHit:
    if row.kind == "summary":
        title = row.request
        fallback = row.completed or row.learned or row.investigated or ""
    else:
        title = row.title
        fallback = row.narrative or " ".join(row.facts or [])
    return SearchHit(
        id=row.id,
        kind=row.kind,
        type=row.type if row.kind == "observation" else "summary",
        title=title,
        subtitle=row.subtitle,
        project=row.project,
        memory_session_id=row.memory_session_id,
        created_at=row.created_at,
        score=round(score, 6),
        snippet=snippet or _shorten(fallback),
        stale_files=stale_files(row) if stale_files else [],
    )


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1].rstrip() + "…"
