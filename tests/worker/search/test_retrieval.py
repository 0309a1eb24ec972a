"""The labelled retrieval set (bench/retrieval_set.json): hybrid recall@5 must hold its target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.minilm import shared_minilm
from tests.support.retrieval_set import CLASSES, load_set, ranks, score, shared_words, store_set
from worker.search.hybrid import SearchMode, SearchResult, index_search, search
from worker.search.vector_index import ChromaTarget, VectorIndex
from worker.search.vector_sync import VectorSync
from worker.storage.sqlite.store import SqliteStore

SET = Path(__file__).resolve().parents[3] / "bench" / "retrieval_set.json"
HYBRID_RECALL5 = 0.9  # issue 14's target; bench/retrieval.py measures 0.92


def test_the_set_is_labelled_and_paraphrases_share_no_word_with_their_answers() -> None:
    data = load_set(str(SET))
    texts = data.texts()
    assert len(data.observations) >= 130
    assert len(data.questions) >= 60
    assert {q.cls for q in data.questions} == set(CLASSES)
    for q in data.questions:
        assert q.relevant, q
        assert all(key in texts for key in q.relevant), q
        if q.cls == "paraphrase":
            assert not any(shared_words(q.question, texts[k]) for k in q.relevant), q


def test_shared_words_ignore_question_words_and_compare_stems() -> None:
    shared = shared_words("why did the login test fail", "Login tests failed")
    assert shared == {"login", "test", "fail"}
    assert shared_words("why did it happen", "why it did") == set()


@pytest.mark.slow
@pytest.mark.timeout(600)  # embeds ~600 documents: seconds idle, a minute on a busy machine
async def test_hybrid_recall_at_5_holds_and_no_class_falls_below_a_single_ranking(
    tmp_path: Path,
) -> None:
    data = load_set(str(SET))
    store = SqliteStore(tmp_path / "memq.db")
    keys = await store_set(store, data)
    index = VectorIndex.open(
        ChromaTarget(kind="embedded", path=str(tmp_path / "chroma")), "memq", shared_minilm()
    )
    await VectorSync(store, lambda: index).drain()
    found = {}
    modes: tuple[SearchMode, ...] = ("hybrid", "fts", "vector")
    for mode in modes:

        async def ask(q: str, mode: SearchMode = mode) -> SearchResult:
            return await search(store, q, vectors=index_search(index), mode=mode, limit=10)

        found[mode] = await ranks(data.questions, keys, ask)
    await store.aclose()
    assert score(data.questions, found["hybrid"]).recall5 >= HYBRID_RECALL5
    for cls in CLASSES:
        picked = [i for i, q in enumerate(data.questions) if q.cls == cls]
        questions = [data.questions[i] for i in picked]
        by_mode = {m: score(questions, [found[m][i] for i in picked]).recall5 for m in modes}
        assert by_mode["hybrid"] >= max(by_mode["fts"], by_mode["vector"]), (cls, by_mode)
