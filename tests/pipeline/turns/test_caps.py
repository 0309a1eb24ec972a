"""What one turn may store: the first observations, each field's head and tail, and why."""

from __future__ import annotations

from pipeline.replies.parser import ParsedObservation
from pipeline.turns.caps import TurnCaps, cap_observations


def _obs(n: int, narrative: str = "short", facts: list[str] | None = None) -> ParsedObservation:
    return ParsedObservation(
        type="discovery",
        title=f"t{n}",
        subtitle=None,
        facts=facts or [],
        narrative=narrative,
        concepts=[],
        files_read=[],
        files_modified=[],
    )


def test_under_the_caps_nothing_changes_and_there_is_no_reason() -> None:
    kept = [_obs(1), _obs(2)]
    capped = cap_observations(kept, TurnCaps(max_observations=2, field_chars=100))
    assert capped.observations == kept
    assert capped.reason is None


def test_the_first_observations_are_kept_and_the_reason_counts_the_rest() -> None:
    capped = cap_observations(
        [_obs(n) for n in range(10)], TurnCaps(max_observations=3, field_chars=100)
    )
    assert [o.title for o in capped.observations] == ["t0", "t1", "t2"]
    assert capped.reason == "kept 3 of 10 observations (MEMQ_MAX_OBSERVATIONS_PER_TURN=3)"


def test_long_fields_keep_head_and_tail_and_are_counted() -> None:
    long = "a" * 500 + "b" * 500
    capped = cap_observations(
        [_obs(1, long, facts=[long, "ok"])], TurnCaps(max_observations=5, field_chars=100)
    )
    [o] = capped.observations
    assert o.narrative is not None
    assert len(o.narrative) <= 100 + 80  # the <elided …/> marker
    assert o.narrative.startswith("a")
    assert o.narrative.endswith("b")
    assert o.facts[1] == "ok"
    assert len(o.facts[0]) <= 100 + 80
    assert capped.reason == "cut 2 field(s) to 100 characters (MEMQ_FIELD_BUDGET_CHARS)"
