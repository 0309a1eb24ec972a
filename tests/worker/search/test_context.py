"""`memq context`: which observations a new session sees, and the character budget."""

from __future__ import annotations

import pytest

from worker.search.context import pick_fresh, pick_relevant, render
from worker.search.notes import NOTES_CLOSE, NOTES_OPEN
from worker.storage.records import StoredRow


def row(i: int, type: str, **fields: object) -> StoredRow:
    return StoredRow(
        kind="observation",
        id=i,
        memory_session_id="s1",
        project="shop",
        created_at=f"2026-11-{1 + i % 28:02d}T10:00:00.000Z",
        type=type,
        title=f"Observation {i}",
        narrative="word " * 100,
        **fields,  # type: ignore[arg-type]
    )


def test_a_decision_outranks_newer_routine_changes() -> None:
    newest_first = [row(i, "change") for i in range(10, 0, -1)] + [row(0, "decision")]
    chosen = pick_relevant(newest_first, 3)
    assert [r.id for r in chosen] == [10, 9, 0]  # newest first in the output


def test_recency_wins_between_equal_types() -> None:
    newest_first = [row(i, "bugfix") for i in range(5, 0, -1)]
    assert [r.id for r in pick_relevant(newest_first, 2)] == [5, 4]


@pytest.mark.parametrize("budget", [500, 1200, 8000])
def test_markdown_never_exceeds_the_budget(budget: int) -> None:
    summary = StoredRow(
        kind="summary",
        id=1,
        memory_session_id="s1",
        project="shop",
        created_at="2026-11-01T10:00:00.000Z",
        request="r " * 400,
        completed="c " * 400,
    )
    observations = [row(i, "bugfix") for i in range(40)]
    text, shown = render("shop", summary, observations, budget)
    assert len(text) <= budget
    assert text.startswith(NOTES_OPEN + "\n# memq: what happened recently in shop")
    assert text.endswith(NOTES_CLOSE)
    assert all(f"#{r.id} bugfix" in text for r in shown)
    assert len(shown) < len(observations)


def test_nothing_stored_renders_nothing() -> None:
    assert render("shop", None, [], 8000) == ("", [])


def test_stale_observations_only_fill_what_fresh_ones_leave_and_the_context_says_so() -> None:
    stale = {"stale_files": ["src/app.py"]}
    newest_first = [row(i, "decision", **(stale if i % 2 else {})) for i in range(6, 0, -1)]
    chosen, left_out = pick_fresh(newest_first, 2, "prefer")
    assert ([r.id for r in chosen], left_out) == ([6, 4], 1)  # 5 would have been shown
    chosen, left_out = pick_fresh(newest_first, 4, "prefer")
    assert ([r.id for r in chosen], left_out) == ([6, 5, 4, 2], 1)  # 5 fills a place, 3 not
    chosen, left_out = pick_fresh(newest_first, 4, "fresh_only")
    assert ([r.id for r in chosen], left_out) == ([6, 4, 2], 2)
    text, _ = render("shop", None, chosen, 8000, left_out)
    assert "(left out 2 observations about files changed since)" in text
    marked, _ = render("shop", None, [newest_first[1]], 8000)
    assert "(changed since: app.py)" in marked


def test_only_stale_observations_with_fresh_only_still_says_what_was_left_out() -> None:
    text, shown = render("shop", None, [], 8000, 3)
    assert shown == []
    assert "(left out 3 observations about files changed since)" in text
