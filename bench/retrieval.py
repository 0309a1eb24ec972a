"""Retrieval bench: recall@5/10 and MRR per ranking and question class, and search latency.

Run from the repository root: `.venv/bin/python bench/retrieval.py` (a few minutes on 2 busy
cores). bench/retrieval_set.json holds the observations and summaries of the bench corpora's
sessions and 65 labelled questions. They are stored in a real SQLite store and indexed into an
embedded Chroma by the real model (VectorSync); then the store is padded to 10,000
observations with bench/search.py's synthetic rows and stand-in vectors for the latency runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CpuMeter, machine, markdown_table, percentile
from bench.search import CheapVectors, index_cheaply, synthetic, write
from tests.support.retrieval_set import (
    CLASSES,
    RetrievalSet,
    RowKey,
    Score,
    load_set,
    ranks,
    score,
    shared_words,
    store_set,
)
from worker.search.embeddings import MiniLmEmbeddingFunction
from worker.search.hybrid import SearchMode, SearchResult, index_search, search
from worker.search.vector_index import ChromaTarget, VectorIndex
from worker.search.vector_sync import VectorSync
from worker.storage.sqlite.store import SqliteStore

SET = Path(__file__).resolve().parent / "retrieval_set.json"
MODES: tuple[SearchMode, ...] = ("fts", "vector", "hybrid")
PADDED = 10_000


def check_paraphrases(data: RetrievalSet) -> None:
    """Exit if a paraphrase question shares a content word with one of its answers."""
    texts = data.texts()
    bad = [
        f"{q.question!r} shares {sorted(common)} with {key}"
        for q in data.questions
        if q.cls == "paraphrase"
        for key in q.relevant
        if (common := shared_words(q.question, texts[key]))
    ]
    if bad:
        sys.exit("paraphrase questions must share no word with their answers:\n" + "\n".join(bad))


async def quality(
    store: SqliteStore,
    index: VectorIndex,
    data: RetrievalSet,
    keys: dict[str, RowKey],
    verbose: bool,
) -> dict[SearchMode, dict[str, Score]]:
    """Per mode: the score overall and per question class."""
    out: dict[SearchMode, dict[str, Score]] = {}
    for mode in MODES:

        async def ask(q: str, mode: SearchMode = mode) -> SearchResult:
            return await search(store, q, vectors=index_search(index), mode=mode, limit=10)

        found = await ranks(data.questions, keys, ask)
        if verbose:
            for q, got in zip(data.questions, found, strict=True):
                if len(got) < min(len(q.relevant), 5) or got[-1] > 5:
                    print(f"{mode} {q.cls}: {q.question!r} relevant ranks {got}")
        by_class = {"all": score(data.questions, found)}
        for cls in CLASSES:
            picked = [i for i, q in enumerate(data.questions) if q.cls == cls]
            by_class[cls] = score([data.questions[i] for i in picked], [found[i] for i in picked])
        out[mode] = by_class
    return out


async def in_process_ms(store: SqliteStore, index: VectorIndex, data: RetrievalSet) -> list[float]:
    """Milliseconds per hybrid search, each labelled question asked twice after 5 warm-ups."""
    vectors = index_search(index)
    asked = [q.question for q in data.questions]
    out = []
    for i, q in enumerate(asked[:5] + asked + asked):
        started = time.perf_counter()
        await search(store, q, vectors=vectors, mode="hybrid", limit=10)
        if i >= 5:
            out.append((time.perf_counter() - started) * 1000)
    return out


def process_ms(data_dir: Path, data: RetrievalSet, runs: int) -> list[float]:
    """Wall milliseconds of `memq search QUESTION` processes on the padded store."""
    memq = Path(sys.executable).with_name("memq")
    env = {**os.environ, "MEMQ_DATA_DIR": str(data_dir), "MEMQ_CHROMA": "on"}
    out = []
    for q in [q.question for q in data.questions][:runs]:
        started = time.perf_counter()
        done = subprocess.run([str(memq), "search", q], env=env, capture_output=True, text=True)
        out.append((time.perf_counter() - started) * 1000)
        if done.returncode != 0 or "note:" in done.stderr:
            sys.exit(f"memq search {q!r} failed ({done.returncode}): {done.stderr.strip()}")
    return out


def quality_table(scores: dict[SearchMode, dict[str, Score]]) -> str:
    rows: list[list[object]] = []
    for cls in ("all", *CLASSES):
        for mode in MODES:
            s = scores[mode][cls]
            rows.append([cls, s.questions, mode, s.recall5, s.recall10, s.mrr])
    return markdown_table(["class", "questions", "ranking", "recall@5", "recall@10", "MRR"], rows)


async def main(process_runs: int, quality_only: bool, verbose: bool) -> None:
    meter = CpuMeter()
    data = load_set(str(SET))
    check_paraphrases(data)
    work = Path(tempfile.mkdtemp(prefix="memq-bench-retrieval-"))
    print(f"machine: {machine()}\n")
    ef = MiniLmEmbeddingFunction()
    store = SqliteStore(work / "memq.db")
    keys = await store_set(store, data)
    index = VectorIndex.open(ChromaTarget(kind="embedded", path=str(work / "chroma")), "memq", ef)
    started = time.perf_counter()
    await VectorSync(store, lambda: index).drain()
    index_s = time.perf_counter() - started
    scores = await quality(store, index, data, keys, verbose)
    print(
        f"{len(data.observations)} observations + {len(data.summaries)} summaries indexed by"
        f" the model in {index_s:.1f} s; {len(data.questions)} questions\n"
    )
    print(quality_table(scores))
    if quality_only:
        await store.aclose()
        return

    pad = PADDED - len(data.observations)
    await write(store, synthetic(pad, seed=1))
    await index_cheaply(store, index, CheapVectors(ef, seed=3))
    counts = await store.counts()
    ms = await in_process_ms(store, index, data)
    await store.aclose()
    proc = process_ms(work, data, process_runs)
    rows = [
        [f"in process, {len(ms)} searches", percentile(ms, 50), percentile(ms, 99)],
        [f"`memq search` process, {len(proc)} runs", percentile(proc, 50), percentile(proc, 99)],
    ]
    print(
        f"\nhybrid search latency over {counts.observations:,} observations"
        f" + {counts.summaries} summaries:\n"
    )
    print(markdown_table(["search", "p50 ms", "p99 ms"], rows))
    print(
        f"\nPadding: {pad:,} synthetic observations from bench/search.py (50 per session, seed 1)"
        " stored through write_batch, each indexed as one title document with a stand-in"
        " vector (the sum of real embeddings of its component and issue phrases plus noise)."
        f" Every search embeds its question with the real model. {meter.report()}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-runs", type=int, default=30, help="`memq search` processes")
    parser.add_argument("--quality-only", action="store_true", help="skip the latency runs")
    parser.add_argument("--misses", action="store_true", help="print the questions missed")
    args = parser.parse_args()
    asyncio.run(main(args.process_runs, args.quality_only, args.misses))
