"""`memq context`: which observations a new session sees, and the character budget."""

from __future__ import annotations

import pytest

from worker.search.context import NOTES_CLOSE, NOTES_OPEN, pick_relevant, render
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
    assert text.startswith(NOTES_OPEN + "# memq: what happened recently in shop")
    assert text.endswith(NOTES_CLOSE)
    assert all(f"#{r.id} bugfix" in text for r in shown)
    assert len(shown) < len(observations)


def test_nothing_stored_renders_nothing() -> None:
    assert render("shop", None, [], 8000) == ("", [])
