"""Search bench: embedding throughput, quality on the test corpus, index build, search latency.

Run from the repository root: `.venv/bin/python bench/search.py` (about 5 minutes on 2 busy
cores; `--full` indexes all 10,000 observations with the real model instead of timing a
budgeted share and extrapolating). Everything runs offline in a temp dir and prints
markdown tables with the machine. How each number is made is printed next to it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.common import CpuMeter, machine, markdown_table, percentile
from pipeline.turns.content_hash import compute_observation_content_hash
from tests.support.search_corpus import load_corpus, store_corpus, top3_hits
from worker.search.embeddings import MiniLmEmbeddingFunction
from worker.search.hybrid import SearchMode, SearchResult, index_search, search
from worker.search.vector_index import ChromaTarget, VectorIndex, documents_for
from worker.search.vector_sync import SyncPolicy, VectorSync
from worker.storage.records import BatchWrite, ObservationRow
from worker.storage.sqlite.store import SqliteStore

COMPONENTS = [
    "cart service",
    "checkout page",
    "payment client",
    "order history API",
    "product catalog",
    "search indexer",
    "image resizer",
    "email worker",
    "login form",
    "session middleware",
    "admin dashboard",
    "CSV exporter",
    "report scheduler",
    "inventory sync",
    "shipping rates",
    "tax calculator",
    "coupon engine",
    "webhook receiver",
    "feature flags",
    "sitemap builder",
    "upload scanner",
    "backup job",
    "docker build",
    "CI pipeline",
    "websocket server",
    "translation loader",
    "rate limiter",
    "config loader",
    "database migrations",
    "cache layer",
]
ISSUES = [
    "timed out under load",
    "leaked memory",
    "returned stale data",
    "failed on empty input",
    "sent duplicate requests",
    "crashed on unicode",
    "was slow on large accounts",
    "lost updates on retry",
    "ignored the timezone",
    "dropped the auth header",
    "logged secrets",
    "deadlocked in tests",
    "broke after the upgrade",
    "double counted totals",
    "skipped the last page",
    "rejected valid tokens",
    "ran twice per deploy",
    "filled the disk",
    "raced with the cron",
    "hung on shutdown",
]
FIXES = [
    "added an index",
    "streamed the rows",
    "made the task idempotent",
    "converted to UTC first",
    "bounded the cache",
    "cancelled the task on teardown",
    "pinned the dependency",
    "added a retry with backoff",
    "validated the input",
    "moved the work to a queue",
    "batched the queries",
    "added a lock",
    "removed the global state",
    "set an explicit timeout",
    "kept the header",
]


def synthetic(n: int, seed: int) -> list[ObservationRow]:
    """n plausible observations over 50-observation sessions, in time order."""
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        c, issue, fix = rng.choice(COMPONENTS), rng.choice(ISSUES), rng.choice(FIXES)
        title = f"The {c} {issue}"
        narrative = (
            f"While working on ticket {1000 + i} we found that the {c} {issue} when"
            f" {rng.choice(COMPONENTS)} called it; we {fix} and added a regression test."
        )
        session = f"bench-{i // 50:05d}"
        out.append(
            ObservationRow(
                memory_session_id=session,
                project=f"project-{i % 7}",
                type=rng.choice(["bugfix", "change", "discovery", "feature", "refactor"]),
                title=title,
                subtitle=f"{fix} ({i})",
                facts=[f"the {c}: {fix}"],
                narrative=narrative,
                concepts=["problem-solution"],
                files_read=[],
                files_modified=[f"src/{c.replace(' ', '_')}.py"],
                prompt_number=1,
                content_hash=compute_observation_content_hash(session, title, narrative),
                created_at=t0 + timedelta(minutes=i),
            )
        )
    return out


def questions(n: int, seed: int) -> list[str]:
    """Natural questions over the synthetic vocabulary."""
    rng = random.Random(seed)
    return [f"why the {rng.choice(COMPONENTS)} {rng.choice(ISSUES)}" for _ in range(n)]


async def write(store: SqliteStore, records: list[ObservationRow]) -> float:
    """Store records one session per batch; seconds taken."""
    started = time.perf_counter()
    for start in range(0, len(records), 50):
        chunk = records[start : start + 50]
        await store.write_batch(
            BatchWrite(
                memory_session_id=chunk[0].memory_session_id,
                project=chunk[0].project,
                fence=1,
                event_ids=[],
                observations=chunk,
            )
        )
    return time.perf_counter() - started


class CheapVectors:
    """Stand-in vectors: real embeddings of a title's component and issue, summed, plus noise."""

    def __init__(self, ef: MiniLmEmbeddingFunction, seed: int) -> None:
        phrases = [*COMPONENTS, *ISSUES]
        self.real = dict(zip(phrases, np.array(ef(phrases)), strict=True))
        self.rng = np.random.default_rng(seed)

    def vector(self, title: str) -> list[float]:
        parts = [v for phrase, v in self.real.items() if phrase in title] or [self.real[ISSUES[0]]]
        v = np.sum(parts, axis=0) + self.rng.normal(0, 0.03, parts[0].shape)
        return [float(x) for x in v / np.linalg.norm(v)]


async def index_cheaply(store: SqliteStore, index: VectorIndex, cheap: CheapVectors) -> int:
    """Drain the vector queue with stand-in vectors (one title document per observation)."""
    done = 0
    while jobs := await store.claim_vector_jobs(limit=1000, now_ms=0, lease_until_ms=1):
        docs = [d for j in jobs if j.row for d in documents_for(j.row) if d.id.endswith("_title")]
        index.collection.upsert(
            ids=[d.id for d in docs],
            embeddings=[cheap.vector(d.text.split(" — ")[0]) for d in docs],
            metadatas=[d.metadata for d in docs],
            documents=[d.text for d in docs],
        )
        await store.finish_vector_jobs([(j.kind, j.id) for j in jobs])
        done += len(jobs)
    return done


async def latencies(store: SqliteStore, index: VectorIndex, mode: SearchMode) -> list[float]:
    """Milliseconds per search over 60 questions (after 5 warm-up searches)."""
    vectors = index_search(index)
    asked = questions(65, seed=7)
    out = []
    for i, q in enumerate(asked):
        started = time.perf_counter()
        await search(store, q, vectors=vectors, mode=mode, limit=10)
        if i >= 5:
            out.append((time.perf_counter() - started) * 1000)
    return out


async def main(full: bool, budget_s: float) -> None:
    meter = CpuMeter()
    work = Path(tempfile.mkdtemp(prefix="memq-bench-search-"))
    print(f"machine: {machine()}\n")
    ef = MiniLmEmbeddingFunction()
    started = time.perf_counter()
    ef.encoder()
    load_s = time.perf_counter() - started

    corpus = load_corpus()
    texts = [t for o in corpus.observations for t in (o.title, o.narrative, *o.facts)][:1000]
    rng = random.Random(5)
    words = " ".join(texts).split()
    short = [" ".join(rng.choices(words, k=rng.randint(5, 15))) for _ in range(1000)]
    rows: list[list[object]] = [["model load + graph build, s", load_s]]
    for name, batch in (
        (f"{len(texts)} corpus texts", texts),
        ("1,000 texts of 5-15 words", short),
    ):
        started = time.perf_counter()
        ef(batch)
        rows.append([f"texts/s ({name})", len(batch) / (time.perf_counter() - started)])
    print(markdown_table(["embedding (all-MiniLM-L6-v2, onnxruntime)", "value"], rows))

    store = SqliteStore(work / "quality" / "memq.db")
    ids = await store_corpus(store, corpus.observations)
    index = VectorIndex.open(ChromaTarget(kind="embedded", path=str(work / "q-chroma")), "q", ef)
    await VectorSync(store, lambda: index).drain()
    hits = []
    for mode in ("hybrid", "fts", "vector"):

        async def ask(q: str, mode: SearchMode = mode) -> SearchResult:
            return await search(store, q, vectors=index_search(index), mode=mode, limit=10)

        hits.append([mode, (await top3_hits(corpus.questions, ids, ask))[0]])
    await store.aclose()
    print("\n" + markdown_table(["search quality: right answer in top 3 (of 30)", "hits"], hits))

    store = SqliteStore(work / "scale" / "memq.db")
    index = VectorIndex.open(ChromaTarget(kind="embedded", path=str(work / "chroma")), "b", ef)
    write_s = await write(store, synthetic(10_000, seed=1))
    sync = VectorSync(store, lambda: index, policy=SyncPolicy(batch_rows=64))
    started, real = time.perf_counter(), 0
    while (full or time.perf_counter() - started < budget_s) and not (
        r := await sync.drain_once()
    ).idle:
        real += r.indexed
    real_s = time.perf_counter() - started
    build_s = write_s + real_s * 10_000 / max(real, 1)
    how = "measured" if real == 10_000 else f"extrapolated from {real:,} in {real_s:.0f} s"
    scope = "" if real == 10_000 else f" ({real:,} indexed by the model, the rest stand-ins)"
    cheap = CheapVectors(ef, seed=3)
    await index_cheaply(store, index, cheap)
    rows = [
        ["store 10,000 observations (SQLite, FTS, outbox), s", write_s],
        [f"index build for 10,000 observations (3 documents each), s ({how})", build_s],
    ]
    table = []
    for mode in ("fts", "vector", "hybrid"):
        ms = await latencies(store, index, mode)
        table.append([f"10,000{scope} / {mode}", percentile(ms, 50), percentile(ms, 99)])
    more_s = await write(store, synthetic(90_000, seed=2))
    started = time.perf_counter()
    await index_cheaply(store, index, cheap)
    rows.append(["store 90,000 more observations, s", more_s])
    rows.append(["upsert 90,000 stand-in vectors (no model), s", time.perf_counter() - started])
    for mode in ("fts", "vector", "hybrid"):
        ms = await latencies(store, index, mode)
        table.append([f"100,000 / {mode}", percentile(ms, 50), percentile(ms, 99)])
    await store.aclose()
    print("\n" + markdown_table(["index", "value"], rows))
    print(
        "\n" + markdown_table(["observations / ranking", "search p50 ms", "search p99 ms"], table)
    )
    print(
        "\nStand-in vectors: one per observation (its title), the sum of the real embeddings of"
        " the title's component and issue phrases plus noise, upserted with no model call;"
        " the 100,000 index is the 10,000 one plus 90,000 stand-ins. Every search embeds its"
        f" question with the real model. {meter.report()}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="index all 10,000 with the model")
    parser.add_argument("--budget-s", type=float, default=60.0, help="model indexing budget")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.budget_s))
