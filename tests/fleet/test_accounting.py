"""The fleet accounting finds what the fault tests assert never happens: a lost call, a call
both stored and dead-lettered, a duplicated observation, a session committed or shown to the
observer out of order."""

from __future__ import annotations

from pipeline.prompting.prompts import RECORDED_ELEMENT
from tests.support.fake_observer import RecordedRequest
from tests.support.fleet_accounting import StoreView, account, percentile
from tests.support.fleet_load import Published, bash_payload, step_command
from tests.support.fleet_processes import PacedObserver

SESSION = "r1-h0-s0"


def _published(steps: int) -> list[Published]:
    return [
        Published(
            event_id=bash_payload(SESSION, n)[0], session=SESSION, step=n, host=0,
            published_at=1000.0 + n, hook_s=0.05,
        )
        for n in range(steps)
    ]  # fmt: skip


def _observation(row_id: int, step: int) -> tuple[int, str, str, list[str]]:
    return row_id, SESSION, f"Bash: {step_command(SESSION, step)}", [bash_payload(SESSION, step)[0]]


def _store(published: list[Published], rows: list[tuple[int, str, str, list[str]]]) -> StoreView:
    return StoreView(
        processed_at={p.event_id: p.published_at + 1.5 for p in published},
        dropped=set(),
        observations=rows,
    )


def test_a_clean_run_balances() -> None:
    published = _published(3)
    report = account(
        published, _store(published, [_observation(i + 1, i) for i in range(3)]), set(),
        missing=0, hook_failures=0, worker_cpu_s={"w0": 1.0}, worker_starts={"w0": 1},
        redis_cpu_s=0.3,
    )  # fmt: skip
    assert report.balanced()
    assert (report.published, report.stored, report.dropped, report.dead) == (3, 3, 0, 0)
    assert report.latency_p50_ms == 1500.0
    assert report.redis_cpu_ms_per_event == 100.0


def test_a_call_neither_processed_nor_dead_is_lost() -> None:
    published = _published(3)
    store = _store(published[:2], [_observation(1, 0), _observation(2, 1)])
    report = account(
        published, store, set(),
        missing=None, hook_failures=0, worker_cpu_s={}, worker_starts={}, redis_cpu_s=None,
    )  # fmt: skip
    assert report.lost == [published[2].event_id]
    assert not report.balanced()


def test_a_call_processed_and_dead_lettered_is_counted_twice() -> None:
    published = _published(2)
    store = _store(published, [_observation(1, 0), _observation(2, 1)])
    report = account(
        published, store, {published[1].event_id},
        missing=None, hook_failures=0, worker_cpu_s={}, worker_starts={}, redis_cpu_s=None,
    )  # fmt: skip
    assert report.double_counted == [published[1].event_id]
    assert report.dead == 0
    assert not report.balanced()


def test_a_second_observation_of_one_call_is_a_duplicate() -> None:
    published = _published(2)
    rows = [_observation(1, 0), _observation(2, 1), _observation(3, 1)]
    report = account(
        published, _store(published, rows), set(),
        missing=None, hook_failures=0, worker_cpu_s={}, worker_starts={}, redis_cpu_s=None,
    )  # fmt: skip
    assert report.duplicated == 1
    assert not report.balanced()


def test_observations_committed_out_of_step_order_are_found() -> None:
    published = _published(3)
    rows = [_observation(1, 0), _observation(2, 2), _observation(3, 1)]
    report = account(
        published, _store(published, rows), set(),
        missing=None, hook_failures=0, worker_cpu_s={}, worker_starts={}, redis_cpu_s=None,
    )  # fmt: skip
    assert report.order_problems == [f"{SESSION}: [0, 2, 1]"]
    assert not report.balanced()


def test_a_stored_call_without_observation_or_vectors_does_not_balance() -> None:
    published = _published(2)
    store = _store(published, [_observation(1, 0)])
    report = account(
        published, store, set(),
        missing=1, hook_failures=0, worker_cpu_s={}, worker_starts={}, redis_cpu_s=None,
    )  # fmt: skip
    assert report.stored_without_observation == 1
    assert report.missing_vectors == 1
    assert not report.balanced()


def test_percentile_is_inclusive_and_none_without_values() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    assert percentile([float(n) for n in range(1, 102)], 50) == 51.0


def _asked(observer: PacedObserver, *steps: int, recorded: str = "") -> None:
    calls = "\n".join(f"<tool_call>{step_command(SESSION, n)}</tool_call>" for n in steps)
    user = f"<{RECORDED_ELEMENT}>{recorded}</{RECORDED_ELEMENT}>\n{calls}"
    observer(
        RecordedRequest(
            provider="anthropic", path="/v1/messages", headers={}, body={"model": "fleet-w0"},
            system="", user=user, messages=[], received_at=0.0,
        )
    )  # fmt: skip


def test_the_observer_order_allows_a_retried_turn_and_finds_a_skip_ahead() -> None:
    observer = PacedObserver(0.0, 0.0)
    _asked(observer, 0, 1)
    _asked(observer, 0, 1)  # the turn retaken after a kill shows its calls again
    _asked(observer, 2, recorded=f"Bash: {step_command(SESSION, 9)}")  # titles are not calls
    assert observer.order_problems({SESSION}) == []
    _asked(observer, 4)
    _asked(observer, 5, 7)
    assert observer.order_problems({SESSION}) == [
        f"{SESSION}: step 4 shown before 3",
        f"{SESSION}: one call showed steps [5, 7]",
    ]
    assert observer.order_problems({"another-session"}) == []
