"""The search side of both Stores: vector queue, keyword search, reindex, timeline, rows by id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.turns.content_hash import compute_observation_content_hash
from tests.support.postgres_server import postgres_server_fixture  # noqa: F401
from tests.support.store_backends import Backend, backend_fixture  # noqa: F401
from worker.errors import LeaseLostError
from worker.search.hybrid import match_expression, search
from worker.storage.index_records import TextFilter, VectorRetry
from worker.storage.protocol import Store
from worker.storage.records import BatchWrite, ObservationRow, PromptRow, SummaryRow

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def obs(
    title: str,
    narrative: str = "",
    *,
    project: str = "shop",
    type: str = "bugfix",
    session: str = "s1",
    at: datetime = T0,
    facts: tuple[str, ...] = (),
    concepts: tuple[str, ...] = ("gotcha",),
) -> ObservationRow:
    return ObservationRow(
        memory_session_id=session,
        project=project,
        type=type,
        title=title,
        subtitle=None,
        facts=list(facts),
        narrative=narrative,
        concepts=list(concepts),
        files_read=[],
        files_modified=[],
        prompt_number=1,
        content_hash=compute_observation_content_hash(session, title, narrative, facts),
        created_at=at,
    )


def summary(request: str, *, session: str = "s1", at: datetime = T0) -> SummaryRow:
    return SummaryRow(
        memory_session_id=session,
        project="shop",
        request=request,
        investigated="cookie flags",
        learned="Secure cookies need https",
        completed=None,
        next_steps=None,
        notes=None,
        prompt_number=1,
        created_at=at,
    )


def batch(*observations: ObservationRow, session: str = "s1", **kw: object) -> BatchWrite:
    project = observations[0].project if observations else "shop"
    return BatchWrite(
        memory_session_id=session,
        project=project,
        fence=1,
        event_ids=[],
        observations=list(observations),
        **kw,  # type: ignore[arg-type]
    )


ROWS = [
    obs("Login test fixed", "The session cookie expired before the assertion ran."),
    obs("Login page spinner", "Shows a spinner while the request is in flight.", type="feature"),
    obs(
        "Cookie banner",
        "Expired consent is asked again.",
        project="blog",
        type="feature",
        session="s2",
    ),
    obs("Cache TTL", "Product pages stay cached 300 s.", type="discovery", at=T0.replace(month=10)),
    obs("Deploy notes", "", facts=("rolled back the migration",), concepts=("trade-off",)),
]


@pytest.fixture(name="store")
def _fix_store(backend: Backend) -> Store:
    return backend.open()


@pytest.fixture(name="searchable")
async def _fix_searchable(store: Store) -> Store:
    for row in ROWS:
        await store.write_batch(batch(row, session=row.memory_session_id))
    await store.write_batch(batch(summaries=[summary("Fix the login test")]))
    return store


@pytest.mark.parametrize(
    ("query", "filters", "expected"),
    [
        ("login cookie", TextFilter(), ["Login test fixed", "Fix the login test"]),
        ("login cookie", TextFilter(type="bugfix"), ["Login test fixed"]),
        ("login", TextFilter(type="feature"), ["Login page spinner"]),
        ("expired", TextFilter(project="blog"), ["Cookie banner"]),
        ('"cookie expired"', TextFilter(), ["Login test fixed"]),
        ('"expired cookie"', TextFilter(), []),
        ("cached", TextFilter(since_ms=int(T0.timestamp() * 1000)), []),
        ("cached", TextFilter(), ["Cache TTL"]),
        ("caching", TextFilter(), ["Cache TTL"]),  # stemmed like the rows
        ("spinn*", TextFilter(), ["Login page spinner"]),
        ("secure cookies", TextFilter(type="summary"), ["Fix the login test"]),
        ("rolled migration", TextFilter(), ["Deploy notes"]),  # facts are searched as words
        ("trade-off", TextFilter(), ["Deploy notes"]),  # and concepts
        ("the", TextFilter(project="blog"), []),  # no stop words: "the" is a word like any
        ("is", TextFilter(project="blog"), ["Cookie banner"]),
        ("failing logins", TextFilter(), []),
        ("it's o'clock \\", TextFilter(), []),  # quotes and backslashes are text, not syntax
    ],
)
async def test_keyword_search_needs_every_word_within_the_filters(
    searchable: Store, query: str, filters: TextFilter, expected: list[str]
) -> None:
    result = await search(searchable, query, mode="fts", filters=filters)
    assert [h.title for h in result.hits] == expected


async def test_keyword_hits_rank_best_first_with_a_highlighted_snippet(searchable: Store) -> None:
    hits = await searchable.search_text(match_expression("login"), TextFilter(), 10)
    by_title = {h.kind: h for h in hits}
    assert len(hits) == 3
    assert [h.bm25 for h in hits] == sorted(h.bm25 for h in hits)
    assert "[Login]" in hits[0].snippet or "[login]" in hits[0].snippet
    assert "summary" in by_title
    (hit,) = await searchable.search_text(match_expression("assertion"), TextFilter(), 10)
    assert "[assertion]" in hit.snippet


async def test_the_vector_queue_is_claimed_finished_and_retried(store: Store) -> None:
    first = await store.write_batch(batch(obs("A"), obs("B"), summaries=[summary("S")]))
    keys = [(r.kind, r.id) for r in first.stored]
    assert await store.vector_lag() == 3
    jobs = await store.claim_vector_jobs(limit=2, now_ms=1000, lease_until_ms=5000)
    assert [(j.kind, j.attempts, j.row is not None) for j in jobs] == [("observation", 0, True)] * 2
    # Leased: not claimable again before the lease ends, the third row still is.
    rest = await store.claim_vector_jobs(limit=10, now_ms=1000, lease_until_ms=5000)
    assert [(j.kind, j.id) for j in rest] == [keys[2]]
    await store.finish_vector_jobs([(j.kind, j.id) for j in jobs])
    await store.retry_vector_jobs(
        [VectorRetry(kind=rest[0].kind, id=rest[0].id, next_attempt_at_ms=9000)], "x" * 900
    )
    assert await store.vector_lag() == 1
    assert await store.claim_vector_jobs(limit=10, now_ms=8999, lease_until_ms=10_000) == []
    (again,) = await store.claim_vector_jobs(limit=10, now_ms=9000, lease_until_ms=10_000)
    assert (again.kind, again.id, again.attempts) == (*keys[2], 1)
    assert again.row is not None
    assert again.row.request == "S"


async def test_the_oldest_waiting_row_dates_the_vector_lag(store: Store) -> None:
    assert await store.vector_oldest_pending_ms() is None
    old, new = T0 - timedelta(hours=1), T0
    written = await store.write_batch(
        batch(obs("New", at=new), summaries=[summary("Older summary", at=old)])
    )
    assert await store.vector_oldest_pending_ms() == int(old.timestamp() * 1000)
    summary_key = next((r.kind, r.id) for r in written.stored if r.kind == "summary")
    await store.finish_vector_jobs([summary_key])  # the summary is indexed: the observation waits
    assert await store.vector_oldest_pending_ms() == int(new.timestamp() * 1000)
    await store.finish_vector_jobs([(r.kind, r.id) for r in written.stored])
    assert await store.vector_oldest_pending_ms() is None


async def test_a_refused_batch_leaves_no_vector_queue_row(store: Store) -> None:
    await store.write_batch(BatchWrite(memory_session_id="s1", project="shop", fence=5,
                                       event_ids=[], observations=[obs("A")]))  # fmt: skip
    with pytest.raises(LeaseLostError):
        await store.write_batch(BatchWrite(memory_session_id="s1", project="shop", fence=4,
                                           event_ids=[], observations=[obs("B")]))  # fmt: skip
    assert await store.vector_lag() == 1


async def test_with_the_vector_index_off_no_vector_queue_row_is_written_until_a_reindex(
    backend: Backend,
) -> None:
    off = backend.open(vector_queue=False)
    await off.write_batch(batch(obs("A"), obs("B"), summaries=[summary("S")]))
    assert await backend.query("SELECT COUNT(*) FROM vector_outbox") == [(0,)]
    assert await off.vector_lag() == 0
    # Switched on again, `memq reindex` queues every stored row.
    on = backend.open()
    assert (await on.start_reindex()).pending == 3
    assert await on.vector_lag() == 3


async def test_reindex_resumes_and_is_scoped_to_a_project(store: Store) -> None:
    await store.write_batch(batch(obs("A"), obs("B")))
    await store.write_batch(batch(obs("C", project="blog", session="s2"), session="s2"))
    jobs = await store.claim_vector_jobs(limit=10, now_ms=0, lease_until_ms=1)
    await store.finish_vector_jobs([(j.kind, j.id) for j in jobs])
    assert await store.vector_lag() == 0
    first = await store.start_reindex("shop")
    assert (first.resumed, first.pending) == (False, 2)
    assert (await store.vector_lag("shop"), await store.vector_lag("blog")) == (2, 0)
    (one,) = await store.claim_vector_jobs(limit=1, now_ms=0, lease_until_ms=1)
    await store.finish_vector_jobs([(one.kind, one.id)])
    again = await store.start_reindex("shop")
    assert (again.resumed, again.pending) == (True, 1)
    await store.finish_reindex("shop")
    assert (await store.start_reindex()).pending == 3


async def test_rows_by_keys_keep_the_keys_order_and_skip_missing_ones(store: Store) -> None:
    result = await store.write_batch(batch(obs("A"), obs("B"), summaries=[summary("S")]))
    a, b, s = ((r.kind, r.id) for r in result.stored)
    found = await store.rows_by_keys([s, ("observation", 999), b, a])
    assert [r.title or r.request for r in found] == ["S", "B", "A"]


async def test_latest_summary_is_the_projects_newest(store: Store) -> None:
    assert await store.latest_summary("shop") is None
    later = T0 + timedelta(minutes=1)
    await store.write_batch(
        batch(summaries=[summary("new", at=later), summary("old"), summary("also old")])
    )
    latest = await store.latest_summary("shop")
    assert latest is not None
    assert latest.request == "new"
    assert await store.latest_summary("blog") is None


async def test_timeline_interleaves_prompts_observations_and_summaries(store: Store) -> None:
    def at(seconds: int) -> datetime:
        return T0 + timedelta(seconds=seconds)

    prompts = [
        PromptRow(memory_session_id="s1", project="shop", prompt_number=n,
                     prompt_text=f"ask {n}", created_at=at(10 * n), event_id=f"p{n}")
        for n in (1, 2)
    ]  # fmt: skip
    await store.write_batch(
        batch(
            obs("second", at=at(15)),
            obs("first", at=at(10)),
            prompts=prompts,
            summaries=[summary("wrap up", at=at(30))],
        )
    )
    await store.write_batch(batch(obs("elsewhere", session="s2"), session="s2"))
    steps = await store.timeline("s1")
    assert [
        (e.kind, e.prompt_text or (e.row and (e.row.title or e.row.request))) for e in steps
    ] == [
        ("prompt", "ask 1"),
        ("observation", "first"),
        ("observation", "second"),
        ("prompt", "ask 2"),
        ("summary", "wrap up"),
    ]
    assert [e.kind for e in await store.timeline("s1", limit=2)] == ["prompt", "observation"]
    assert await store.timeline("nobody") == []


async def test_session_fence_is_the_stored_one(store: Store) -> None:
    assert await store.session_fence("s1") is None
    await store.write_batch(BatchWrite(memory_session_id="s1", project="shop", fence=7,
                                       event_ids=[]))  # fmt: skip
    assert await store.session_fence("s1") == 7
