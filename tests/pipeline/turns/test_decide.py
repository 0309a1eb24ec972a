"""The outcome table in docs/events.md, row by row, against `decide`.

The test reads the table from the docs: each row's outcome, stream-entries and conversation
columns are what `decide` must answer for that row's examples below. A row the docs add
without examples here fails, and so do examples for a row the docs no longer have.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest

from pipeline.backoff import MAX_RETRY_AFTER_S
from pipeline.outcomes import JobResult, Outcome
from pipeline.replies.classify import OutputCategory
from pipeline.replies.parser import ParseKind
from pipeline.turns.decide import (
    MAX_PAUSE_S,
    Bookkeeping,
    Conversation,
    Decision,
    Entries,
    Failed,
    FailureKind,
    Happened,
    Policy,
    RefusalKind,
    Refused,
    Replied,
    ReplyTooLarge,
    Undecodable,
    decide,
)

EVENTS_MD = Path(__file__).resolve().parents[3] / "docs" / "events.md"
HEADING = "## What the worker does with a reply"
POLICY = Policy(quota_pause_s=300.0, max_attempts=5, retry_base_s=2.0, retry_max_s=120.0)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

Check = Callable[[Decision], bool]


def _fine(_: Decision) -> bool:
    return True


def _reply(
    parse_kind: ParseKind,
    classification: OutputCategory = "xml",
    *,
    turn_kind: Literal["observe", "summarize"] = "observe",
    parse_reason: str | None = None,
    capped: str | None = None,
    reset_at: float | None = None,
) -> Replied:
    return Replied(
        turn_kind=turn_kind,
        valid=parse_kind in ("observations", "summary", "skip"),
        parse_kind=parse_kind,
        classification=classification,
        parse_reason=parse_reason,
        capped=capped,
        reset_at=reset_at,
    )


def _failed(kind: FailureKind, attempts: int = 0, **kw: float) -> Failed:
    return Failed(kind=kind, reason=f"{kind} failure", attempts=attempts, entries=3, **kw)


# The first column of each docs row, and what happened in turns of that row (with one more
# check each, on what the columns do not say).
EXAMPLES: dict[str, list[tuple[Happened, Check]]] = {
    "valid observations / summary": [
        (_reply("observations"), lambda d: d.category is None),
        (_reply("summary", turn_kind="summarize"), _fine),
        (_reply("summary"), _fine),
        (
            _reply("observations", capped="kept 20 of 31"),
            lambda d: (d.category, d.reason) == ("capped", "kept 20 of 31"),
        ),
        (Bookkeeping(), lambda d: d.outcome is Outcome.RECORDED),  # the same columns
    ],
    '`<skip_summary reason="…"/>`, or an empty reply to tool calls': [
        (_reply("skip", turn_kind="summarize"), _fine),
        (_reply("invalid", "idle", parse_reason="not_text"), _fine),
    ],
    "quota, usage-limit or login prose; HTTP quota/billing/auth error": [
        (
            _reply("invalid", "quota", parse_reason="no_root"),
            lambda d: d.pause_provider_s == d.defer_s == POLICY.quota_pause_s,
        ),
        (
            _reply("invalid", "auth", parse_reason="no_root"),
            lambda d: d.reason == "observer replied with auth prose",
        ),
        (
            _reply("invalid", "quota", reset_at=NOW.timestamp() + 900),
            lambda d: d.pause_provider_s == d.defer_s == 900.0,
        ),
        (
            _reply("invalid", "quota", reset_at=NOW.timestamp() + 10 * MAX_PAUSE_S),
            lambda d: d.pause_provider_s == MAX_PAUSE_S,
        ),
        (_failed(FailureKind.QUOTA, reset_after_s=60.0), lambda d: d.pause_provider_s == 60.0),
        (_failed(FailureKind.QUOTA, attempts=9), lambda d: not d.count_attempt),
        (_failed(FailureKind.AUTH), lambda d: d.pause_provider_s == POLICY.quota_pause_s),
    ],
    "any other non-XML text": [
        (
            _reply("invalid", "prose", parse_reason="no_root"),
            lambda d: d.result.label == "dropped:prose",
        ),
        (
            _reply("invalid", "xml", parse_reason="no_complete_block"),
            lambda d: d.category == "xml_no_complete_block",
        ),
        (
            _reply("observations", turn_kind="summarize"),
            lambda d: d.category == "summary_as_observation",
        ),
        (_reply("invalid", "idle", turn_kind="summarize"), lambda d: d.category == "idle"),
    ],
    "a reply over `MEMQ_OBSERVER_MAX_REPLY_BYTES`": [
        (ReplyTooLarge(reason="reply over 1 MB"), lambda d: d.reason == "reply over 1 MB"),
    ],
    "timeout, connection error, 5xx, 429": [
        (_failed(FailureKind.TRANSIENT), lambda d: 1.0 <= d.defer_s <= 2.0 and d.count_attempt),
        (_failed(FailureKind.TRANSIENT, attempts=3), lambda d: 8.0 <= d.defer_s <= 16.0),
        (
            _failed(FailureKind.TRANSIENT, retry_after_s=30.0),
            lambda d: d.defer_s == d.short_pause_s == 30.0,
        ),
        (
            _failed(FailureKind.TRANSIENT, retry_after_s=10 * MAX_RETRY_AFTER_S),
            lambda d: d.defer_s == MAX_RETRY_AFTER_S,
        ),
        (_failed(FailureKind.PERMANENT, attempts=3), lambda d: d.short_pause_s is None),
    ],
    "storage fails before or during the commit": [
        (_failed(FailureKind.STORAGE), lambda d: d.count_attempt and d.counted == 1),
    ],
    "retries exhausted (`MEMQ_MAX_ATTEMPTS`)": [
        (_failed(FailureKind.TRANSIENT, attempts=4), lambda d: d.counted == 3),
        (_failed(FailureKind.PERMANENT, attempts=4), lambda d: d.reason == "permanent failure"),
        (_failed(FailureKind.STORAGE, attempts=7), _fine),
    ],
    "an entry that does not decode": [
        (Undecodable(entries=2), lambda d: d.counted == 2),
    ],
    "(before the call) the provider is paused (another worker met its quota)": [
        (
            Refused(kind=RefusalKind.PROVIDER_PAUSED, reason="paused", wait_s=42.0),
            lambda d: d.defer_s == 42.0 and d.counted == 0 and d.pause_provider_s is None,
        ),
    ],
    "(before the call) the day's token budget is spent": [
        (
            Refused(kind=RefusalKind.BUDGET, reason="spent", wait_s=600.0),
            lambda d: d.defer_s == 600.0 and d.counted == 1,
        ),
    ],
    "(before the call) the fleet is over `MEMQ_RATE_LIMIT_RPM`/`TPM`, or in a short pause "
    "after a `retry-after`": [
        (
            Refused(kind=RefusalKind.THROTTLED, reason="rpm", wait_s=4.0),
            lambda d: 4.0 <= d.defer_s <= 5.0 and not d.count_attempt,
        ),
    ],
}


class Row:
    """One row of the docs table: its first column and what the other three say."""

    def __init__(self, cells: list[str]) -> None:
        self.happened, outcome, self.entries, self.conversation = cells
        match = re.match(r"`([^`]+)`", outcome)
        assert match is not None, f"the outcome column starts with the outcome: {outcome!r}"
        self.outcome = match.group(1)


def docs_rows() -> list[Row]:
    """The rows of the outcome table in docs/events.md."""
    text = EVENTS_MD.read_text(encoding="utf-8")
    lines = text[text.index(HEADING) :].splitlines()
    start = lines.index("| observer reply | outcome | stream entries | conversation |")
    rows = []
    for line in lines[start + 2 :]:  # after the header and its |---| line
        if not line.startswith("|"):
            break  # the table ends at its first line that is not a row
        rows.append(Row([cell.strip() for cell in line.strip().strip("|").split(" | ")]))
    return rows


ROWS = docs_rows()


def _label(d: Decision) -> str:
    return f"{d.outcome}:{d.category}" if d.category else str(d.outcome)


def test_the_table_has_its_rows_and_every_row_has_examples() -> None:
    assert len(ROWS) >= 10
    assert [r.happened for r in ROWS] == list(EXAMPLES)


@pytest.mark.parametrize("row", ROWS, ids=[r.happened[:50] for r in ROWS])
def test_decide_answers_each_row_of_the_docs_table(row: Row) -> None:
    for happened, check in EXAMPLES[row.happened]:
        d = decide(happened, POLICY, now=NOW, jitter=0.5)
        where = f"{happened!r} -> {d!r}"
        if d.outcome is Outcome.RECORDED:  # bookkeeping: like a stored turn, never counted
            assert row.outcome == "stored", where
        elif "<" in row.outcome:  # `dropped:<category>`: any category
            assert _label(d).startswith(row.outcome.split("<")[0]), where
            assert d.category, where
        elif ":" in row.outcome:
            assert _label(d) == row.outcome, where
        else:
            assert str(d.outcome) == row.outcome, where
        entries = "kept" if d.entries is Entries.KEEP else "acked"
        assert row.entries.split(",")[0] == entries, where
        assert d.stop is (d.entries is Entries.KEEP) is d.result.stop, where
        dead = d.entries is Entries.DEAD_LETTER
        assert dead is row.outcome.startswith("dead"), where
        assert row.conversation == str(d.conversation), where
        assert check(d), where


@pytest.mark.parametrize("jitter", [0.0, 0.999])
def test_the_jitter_only_spreads_retries_and_throttled_turns(jitter: float) -> None:
    retry = decide(_failed(FailureKind.TRANSIENT, attempts=2), POLICY, now=NOW, jitter=jitter)
    assert 4.0 <= retry.defer_s <= 8.0
    assert retry.defer_s == pytest.approx(8.0 * (0.5 + 0.5 * jitter))
    throttled = decide(
        Refused(kind=RefusalKind.THROTTLED, reason="rpm", wait_s=2.0),
        POLICY,
        now=NOW,
        jitter=jitter,
    )
    assert throttled.defer_s == pytest.approx(2.0 * (1 + 0.25 * jitter))
    paused = decide(_failed(FailureKind.QUOTA), POLICY, now=NOW, jitter=jitter)
    assert paused.defer_s == POLICY.quota_pause_s


def test_the_last_attempt_is_the_one_that_reaches_the_max() -> None:
    outcomes = [
        decide(_failed(FailureKind.TRANSIENT, attempts=n), POLICY, now=NOW, jitter=0.5).outcome
        for n in range(POLICY.max_attempts)
    ]
    assert outcomes == [Outcome.RETRY] * (POLICY.max_attempts - 1) + [Outcome.DEAD]
    assert (
        Conversation.RESET
        is decide(
            _failed(FailureKind.TRANSIENT, attempts=4), POLICY, now=NOW, jitter=0.5
        ).conversation
    )


def test_every_decision_that_stops_a_job_names_its_result() -> None:
    stops = [
        d.outcome
        for examples in EXAMPLES.values()
        for happened, _ in examples
        if (d := decide(happened, POLICY, now=NOW, jitter=0.5)).stop
    ]
    assert {JobResult.stopped_by(o) for o in stops} == {
        JobResult.PAUSED,
        JobResult.RETRY,
        JobResult.THROTTLED,
    }
