"""The observer's cost over the last days, per project and UTC day, for `memq stats` and the UI."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta

import msgspec

from worker.settings import Settings
from worker.storage.protocol import ReadStore
from worker.storage.records import CostDay

DEFAULT_DAYS = 14
_PER = 1_000_000


class Prices(msgspec.Struct, frozen=True, kw_only=True):
    """What a million tokens cost (MEMQ_PRICE_*_PER_MTOK), in the user's own currency."""

    input: float
    cached_input: float
    output: float

    def spend(self, input_tokens: int, cached_input_tokens: int, output_tokens: int) -> float:
        """The cost of these tokens; input counts its cached part, which has its own price."""
        uncached = max(0, input_tokens - cached_input_tokens)
        return (
            uncached * self.input
            + cached_input_tokens * self.cached_input
            + output_tokens * self.output
        ) / _PER


class Totals(msgspec.Struct, frozen=True, kw_only=True):
    """Days' figures added up: tokens (input includes cached), calls, observations stored."""

    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    calls: int
    observations: int
    reported_cost_usd: float | None = None
    """What the providers themselves said the calls cost (claude-code does), None if none did."""


def totals(days: Iterable[CostDay]) -> Totals:
    """The figures of `days` added up (the window's, or one day's over several projects)."""
    rows = list(days)
    reported = [d.reported_cost_usd for d in rows if d.reported_cost_usd is not None]
    return Totals(
        input_tokens=sum(d.input_tokens for d in rows),
        cached_input_tokens=sum(d.cached_input_tokens for d in rows),
        output_tokens=sum(d.output_tokens for d in rows),
        calls=sum(d.calls for d in rows),
        observations=sum(d.observations for d in rows),
        reported_cost_usd=round(sum(reported), 6) if reported else None,
    )


class PerObservation(msgspec.Struct, frozen=True, kw_only=True):
    """Observer tokens spent for each observation stored."""

    input_tokens: float
    cached_input_tokens: float
    output_tokens: float


class CostRow(CostDay, frozen=True, kw_only=True):
    """One project's day as the report shows it: the store's figures and what they cost."""

    spend: float | None = None
    """None unless prices are set."""


class Cost(Totals, frozen=True, kw_only=True):
    """`memq stats --json`'s `cost`: the window's totals, tokens per observation, each day."""

    window_days: int
    first_day: str
    last_day: str
    per_observation: PerObservation | None
    """None when no observation was stored in the window."""
    prices: Prices | None
    spend: float | None
    days: list[CostRow]
    """Per project and UTC day, oldest first; days with no call and no observation left out."""


def prices_from(settings: Settings | None) -> Prices | None:
    """The settings' prices, or None: memq shows tokens only unless the user names prices."""
    if settings is None or settings.price_input_per_mtok is None:
        return None
    assert settings.price_cached_per_mtok is not None  # Settings sets all three or none
    assert settings.price_output_per_mtok is not None
    return Prices(
        input=settings.price_input_per_mtok,
        cached_input=settings.price_cached_per_mtok,
        output=settings.price_output_per_mtok,
    )


def build_cost(found: list[CostDay], *, today: date, days: int, prices: Prices | None) -> Cost:
    """The report of `found` (a Store's cost_by_day) over the `days` ending `today`."""
    rows = [
        CostRow(
            **msgspec.structs.asdict(d),
            spend=None
            if prices is None
            else prices.spend(d.input_tokens, d.cached_input_tokens, d.output_tokens),
        )
        for d in found
    ]
    t = totals(rows)
    per_observation = None
    if t.observations:
        per_observation = PerObservation(
            input_tokens=round(t.input_tokens / t.observations, 1),
            cached_input_tokens=round(t.cached_input_tokens / t.observations, 1),
            output_tokens=round(t.output_tokens / t.observations, 1),
        )
    return Cost(
        window_days=days,
        first_day=(today - timedelta(days=days - 1)).isoformat(),
        last_day=today.isoformat(),
        **msgspec.structs.asdict(t),
        per_observation=per_observation,
        prices=prices,
        spend=None
        if prices is None
        else prices.spend(t.input_tokens, t.cached_input_tokens, t.output_tokens),
        days=rows,
    )


class CostReader:
    """Reads the cost report from a store, at most once every `max_age_s` (0: every call):
    the UI's panel refreshes every few seconds, the figures change by the day."""

    def __init__(
        self,
        store: ReadStore,
        prices: Prices | None = None,
        *,
        days: int = DEFAULT_DAYS,
        max_age_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._prices = prices
        self._days = days
        self._max_age_s = max_age_s
        self._clock = clock
        self._last: tuple[float, Cost] | None = None

    async def read(self) -> Cost:
        """The report of the last days (today included), read again once it is too old."""
        now = self._clock()
        if self._last is not None and now - self._last[0] < self._max_age_s:
            return self._last[1]
        found = await self._store.cost_by_day(self._days)
        cost = build_cost(
            found, today=datetime.now(UTC).date(), days=self._days, prices=self._prices
        )
        self._last = (now, cost)
        return cost
