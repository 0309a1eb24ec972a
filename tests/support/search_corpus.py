"""The search-quality corpus (tests/data/search_corpus.json): load it, store it, score a ranking."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from itertools import groupby
from pathlib import Path

import msgspec

from pipeline.turns.content_hash import compute_observation_content_hash
from worker.search.hybrid import SearchResult
from worker.storage.protocol import Store
from worker.storage.records import BatchWrite, ObservationRow

CORPUS = Path(__file__).resolve().parents[1] / "data" / "search_corpus.json"


class CorpusObservation(msgspec.Struct, frozen=True):
    key: str
    memory_session_id: str
    project: str
    type: str
    title: str
    subtitle: str
    narrative: str
    facts: list[str]
    concepts: list[str]
    files_read: list[str]
    files_modified: list[str]
    created_at: datetime


class Question(msgspec.Struct, frozen=True):
    question: str
    answer: str


class Corpus(msgspec.Struct, frozen=True):
    description: str
    observations: list[CorpusObservation]
    questions: list[Question]


def load_corpus(path: Path = CORPUS) -> Corpus:
    """The corpus file, typed."""
    return msgspec.json.decode(path.read_bytes(), type=Corpus)


def record(o: CorpusObservation) -> ObservationRow:
    """The observation as the worker would store it."""
    return ObservationRow(
        memory_session_id=o.memory_session_id,
        project=o.project,
        type=o.type,
        title=o.title,
        subtitle=o.subtitle,
        facts=o.facts,
        narrative=o.narrative,
        concepts=o.concepts,
        files_read=o.files_read,
        files_modified=o.files_modified,
        prompt_number=1,
        content_hash=compute_observation_content_hash(o.memory_session_id, o.title, o.narrative),
        created_at=o.created_at,
    )


async def store_corpus(store: Store, observations: Iterable[CorpusObservation]) -> dict[str, int]:
    """Write the observations one batch per session; returns corpus key -> stored row id."""
    ids: dict[str, int] = {}
    ordered = sorted(observations, key=lambda o: o.memory_session_id)
    for session, group in groupby(ordered, key=lambda o: o.memory_session_id):
        members = list(group)
        result = await store.write_batch(
            BatchWrite(
                memory_session_id=session,
                project=members[0].project,
                fence=1,
                event_ids=[],
                observations=[record(o) for o in members],
            )
        )
        assert result.deduplicated == 0, f"{session}: corpus rows must be distinct"
        for o, row in zip(members, result.stored, strict=True):
            ids[o.key] = row.id
    return ids


async def top3_hits(
    questions: Iterable[Question],
    ids: dict[str, int],
    ask: Callable[[str], Awaitable[SearchResult]],
) -> tuple[int, list[str]]:
    """How many questions have their answer in the top 3, and the questions that missed."""
    hits, missed = 0, []
    for q in questions:
        result = await ask(q.question)
        top = [h.id for h in result.hits[:3] if h.kind == "observation"]
        if ids[q.answer] in top:
            hits += 1
        else:
            missed.append(q.question)
    return hits, missed
