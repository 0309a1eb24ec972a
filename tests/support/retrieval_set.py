"""The labelled retrieval set (bench/retrieval_set.json): load, store, check and score it."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from itertools import groupby

import msgspec

from tests.support.search_corpus import CorpusObservation, record
from worker.search.hybrid import STOPWORDS, SearchResult
from worker.storage.index_records import RowKind
from worker.storage.protocol import Store
from worker.storage.records import BatchWrite, SummaryRow

RowKey = tuple[RowKind, int]
CLASSES = ("keyword", "paraphrase", "summary", "file", "decision")
_WORD = re.compile(r"[a-z0-9]+")
_SUFFIX = re.compile(r"(?<=...)(ing|ed|es|s)$")


class SetSummary(msgspec.Struct, frozen=True):
    key: str
    memory_session_id: str
    project: str
    request: str | None
    investigated: str | None
    learned: str | None
    completed: str | None
    next_steps: str | None
    notes: str | None
    created_at: datetime


class LabelledQuestion(msgspec.Struct, frozen=True):
    question: str
    cls: str
    relevant: list[str]


class RetrievalSet(msgspec.Struct, frozen=True):
    description: str
    observations: list[CorpusObservation]
    summaries: list[SetSummary]
    questions: list[LabelledQuestion]

    def texts(self) -> dict[str, str]:
        """Every row's searchable text (and its files), by key."""
        out = {
            o.key: " ".join(
                (o.title, o.subtitle, o.narrative, *o.facts, *o.concepts, *o.files_read)
            )
            + " "
            + " ".join(o.files_modified)
            for o in self.observations
        }
        for s in self.summaries:
            fields = (s.request, s.investigated, s.learned, s.completed, s.next_steps, s.notes)
            out[s.key] = " ".join(f for f in fields if f)
        return out


class Score(msgspec.Struct, frozen=True):
    """Recall@5, recall@10 and mean reciprocal rank over some questions."""

    questions: int
    recall5: float
    recall10: float
    mrr: float


def load_set(path: str) -> RetrievalSet:
    """The set file, typed."""
    with open(path, "rb") as f:
        return msgspec.json.decode(f.read(), type=RetrievalSet)


def stems(text: str) -> set[str]:
    """Content words without -ing/-ed/-es/-s, cut to five letters: 'fails', 'failed' -> 'fail'."""
    words = _WORD.findall(text.lower())
    return {_SUFFIX.sub("", w)[:5] for w in words if w not in STOPWORDS and len(w) > 2}


def shared_words(question: str, row_text: str) -> set[str]:
    """The question's content stems that also occur in the row's text."""
    return stems(question) & stems(row_text)


async def store_set(store: Store, data: RetrievalSet) -> dict[str, RowKey]:
    """Write observations and summaries one batch per session; key -> (kind, stored id)."""
    keys: dict[str, RowKey] = {}
    rows = sorted(data.observations, key=lambda o: o.memory_session_id)
    summaries = {s: list(g) for s, g in groupby(sorted(data.summaries, key=_session), _session)}
    for session, group in groupby(rows, key=lambda o: o.memory_session_id):
        members = list(group)
        sums = summaries.pop(session, [])
        result = await store.write_batch(
            BatchWrite(
                memory_session_id=session,
                project=members[0].project,
                fence=1,
                event_ids=[],
                observations=[record(o) for o in members],
                summaries=[_summary(s) for s in sums],
            )
        )
        assert result.deduplicated == 0, f"{session}: rows must be distinct"
        stored_obs = [r for r in result.stored if r.kind == "observation"]
        stored_sums = [r for r in result.stored if r.kind == "summary"]
        for o, row in zip(members, stored_obs, strict=True):
            keys[o.key] = ("observation", row.id)
        for s, row in zip(sums, stored_sums, strict=True):
            keys[s.key] = ("summary", row.id)
    assert not summaries, f"summaries of sessions without observations: {list(summaries)}"
    return keys


def _session(s: SetSummary) -> str:
    return s.memory_session_id


def _summary(s: SetSummary) -> SummaryRow:
    return SummaryRow(
        memory_session_id=s.memory_session_id,
        project=s.project,
        request=s.request,
        investigated=s.investigated,
        learned=s.learned,
        completed=s.completed,
        next_steps=s.next_steps,
        notes=s.notes,
        prompt_number=1,
        created_at=s.created_at,
    )


async def ranks(
    questions: Iterable[LabelledQuestion],
    keys: dict[str, RowKey],
    ask: Callable[[str], Awaitable[SearchResult]],
) -> list[list[int]]:
    """Per question, the 1-based ranks (in the top 10) of its relevant rows that were found."""
    out = []
    for q in questions:
        result = await ask(q.question)
        found = [(h.kind, h.id) for h in result.hits[:10]]
        out.append(sorted(found.index(keys[r]) + 1 for r in q.relevant if keys[r] in found))
    return out


def score(questions: list[LabelledQuestion], found: list[list[int]]) -> Score:
    """Recall@k = relevant rows in the top k / min(relevant rows, k); MRR of the first one."""
    n = len(questions)
    r5 = r10 = rr = 0.0
    for q, got in zip(questions, found, strict=True):
        r5 += sum(1 for r in got if r <= 5) / min(len(q.relevant), 5)
        r10 += len(got) / min(len(q.relevant), 10)
        rr += 1 / got[0] if got else 0.0
    return Score(questions=n, recall5=r5 / n, recall10=r10 / n, mrr=rr / n)
