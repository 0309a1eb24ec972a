"""Both Stores: observer spend per project and UTC day (`cost_by_day`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec

from tests.support.postgres_server import postgres_server_fixture  # noqa: F401
from tests.support.store_backends import Backend, backend_fixture  # noqa: F401
from tests.worker.storage.test_sqlite_store import batch, obs
from worker.storage.records import CostDay, TokenUsage

NOW = datetime(2024, 5, 14, 9, 30, tzinfo=UTC)
TODAY = "2024-05-14"


def usage(project: str, at: datetime, n: int, *, session: str = "s1") -> TokenUsage:
    return TokenUsage(
        memory_session_id=session,
        project=project,
        provider="anthropic",
        model="m",
        input_tokens=n,
        cached_input_tokens=n // 2,
        output_tokens=n // 10,
        created_at=at,
    )


async def test_cost_by_day_sums_tokens_calls_and_observations(backend: Backend) -> None:
    store = backend.open(lambda: NOW)
    assert await store.cost_by_day() == []
    yesterday = NOW - timedelta(days=1)
    # A day boundary in UTC: 23:59:59.999 belongs to yesterday, 00:00 to today.
    late = datetime(2024, 5, 13, 23, 59, 59, 999000, tzinfo=UTC)
    midnight = datetime(2024, 5, 14, tzinfo=UTC)
    await store.write_batch(
        batch(
            session="s1",
            project="alpha",
            observations=[obs("a", "x", project="alpha", at=late)],
            usage=[usage("alpha", late, 100), usage("alpha", midnight, 40)],
        )
    )
    await store.write_batch(
        batch(
            session="s1",
            project="alpha",
            observations=[
                obs("b", "y", project="alpha", at=NOW),
                obs("c", "z", project="alpha", at=NOW),
            ],
            usage=[usage("alpha", NOW, 1000)],
        )
    )
    await store.write_batch(
        batch(
            session="s2",
            project="beta",
            usage=[usage("beta", yesterday, 7, session="s2")],
        )
    )
    found = await store.cost_by_day()
    assert found == [
        CostDay(
            project="alpha",
            day="2024-05-13",
            input_tokens=100,
            cached_input_tokens=50,
            output_tokens=10,
            calls=1,
            observations=1,
        ),
        CostDay(
            project="beta",
            day="2024-05-13",
            input_tokens=7,
            cached_input_tokens=3,
            output_tokens=0,
            calls=1,
            observations=0,
        ),
        CostDay(
            project="alpha",
            day=TODAY,
            input_tokens=1040,
            cached_input_tokens=520,
            output_tokens=104,
            calls=2,
            observations=2,
        ),
    ]


async def test_cost_by_day_keeps_only_the_window(backend: Backend) -> None:
    store = backend.open(lambda: NOW)
    first_day = datetime(2024, 5, 1, tzinfo=UTC)  # the 14th day back, today included
    before = first_day - timedelta(milliseconds=1)
    await store.write_batch(
        batch(
            observations=[obs("old", "x", at=before), obs("first", "y", at=first_day)],
            usage=[usage("p1", before, 500), usage("p1", first_day, 3)],
        )
    )
    found = await store.cost_by_day()
    assert [(c.day, c.input_tokens, c.calls, c.observations) for c in found] == [
        ("2024-05-01", 3, 1, 1)
    ]
    assert await store.cost_by_day(days=1) == []
    assert [c.day for c in await store.cost_by_day(days=15)] == ["2024-04-30", "2024-05-01"]


async def test_cost_by_day_sums_the_cost_the_provider_reported(backend: Backend) -> None:
    # claude-code reports what each call cost; the HTTP providers do not (NULL, not 0).
    store = backend.open(lambda: NOW)
    reported = [
        msgspec.structs.replace(usage("alpha", NOW, 10), provider="claude-code", cost_usd=0.25),
        msgspec.structs.replace(usage("alpha", NOW, 10), provider="claude-code", cost_usd=0.5),
        usage("alpha", NOW, 10),
    ]
    await store.write_batch(batch(session="s1", project="alpha", usage=reported))
    beta = [usage("beta", NOW, 5, session="s2")]
    await store.write_batch(batch(session="s2", project="beta", usage=beta))
    found = {d.project: d.reported_cost_usd for d in await store.cost_by_day()}
    assert found == {"alpha": 0.75, "beta": None}
