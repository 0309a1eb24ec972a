"""The operator panel's cost charts as geometry: bars per UTC day, scaled to the tallest."""

from __future__ import annotations

from datetime import date, timedelta

import msgspec

from worker.ops.cost import Cost, CostRow, Totals, totals

WIDTH = 280
HEIGHT = 96
PLOT_BOTTOM = 14  # room for the first and last day under the axis
PLOT = HEIGHT - 14 - PLOT_BOTTOM  # 14 above it for the scale label
_GAP = 1.0
# Uncached input at the bottom, then cached input, then output: the stack is input + output.
PARTS = (
    ("input", "uncached input", "#4f7cac"),
    ("cached", "cached input", "#9cc3e6"),
    ("output", "output", "#d9822b"),
)


class Bar(msgspec.Struct, frozen=True, kw_only=True):
    """One rectangle: a day's value (or one part of it), with its hover text."""

    day: str
    part: str
    value: float
    x: float
    y: float
    width: float
    height: float
    fill: str
    label: str


class Chart(msgspec.Struct, frozen=True, kw_only=True):
    """One small bar chart: its title, scale, bars and the days it spans."""

    key: str
    title: str
    unit: str
    width: int
    height: int
    max_value: float
    axis_y: int
    bars: list[Bar]
    first_day: str
    last_day: str
    empty: bool
    legend: list[tuple[str, str]] = []


def cost_charts(cost: Cost | None, project: str | None = None) -> list[Chart]:
    """Tokens per stored observation per day, and each day's tokens stacked by kind, over the
    window of `memq stats`' cost (one project's, or all projects')."""
    days = _days(cost, project)
    first = next(iter(days), "")
    last = next(reversed(days), "")
    per_obs = {
        d: (t.input_tokens + t.output_tokens) / t.observations
        for d, t in days.items()
        if t.observations
    }
    stacked = {
        d: (max(0, t.input_tokens - t.cached_input_tokens), t.cached_input_tokens, t.output_tokens)
        for d, t in days.items()
    }
    no_calls = not any(t.calls for t in days.values())
    return [
        _per_observation_chart(days, per_obs, first, last, no_calls or not per_obs),
        _stacked_chart(days, stacked, first, last, no_calls),
    ]


def _days(cost: Cost | None, project: str | None) -> dict[str, Totals]:
    # Every day of the window, oldest first, so a quiet day shows as a gap, not as nothing.
    if cost is None:
        return {}
    start = date.fromisoformat(cost.first_day)
    end = date.fromisoformat(cost.last_day)
    rows: dict[str, list[CostRow]] = {
        (start + timedelta(days=i)).isoformat(): [] for i in range((end - start).days + 1)
    }
    for row in cost.days:
        # A row of a day the window no longer covers (midnight between reads) is left out.
        if (project is None or row.project == project) and row.day in rows:
            rows[row.day].append(row)
    return {day: totals(found) for day, found in rows.items()}


def _slots(n: int) -> tuple[float, float]:
    # Each day's slot width and its bar's width.
    slot = WIDTH / max(n, 1)
    return slot, max(1.0, slot - _GAP)


def _scale(value: float, max_value: float) -> float:
    return 0.0 if max_value <= 0 else value / max_value * PLOT


def _per_observation_chart(
    days: dict[str, Totals], per_obs: dict[str, float], first: str, last: str, empty: bool
) -> Chart:
    top = max(per_obs.values(), default=0.0)
    slot, width = _slots(len(days))
    bars = []
    for i, day in enumerate(days):
        if day not in per_obs:
            continue
        value = per_obs[day]
        height = _scale(value, top)
        t = days[day]
        bars.append(
            Bar(
                day=day,
                part="per_observation",
                value=round(value, 1),
                x=round(i * slot, 2),
                y=round(HEIGHT - PLOT_BOTTOM - height, 2),
                width=round(width, 2),
                height=round(height, 2),
                fill=PARTS[0][2],
                label=f"{day}: {value:,.0f} tokens per observation"
                f" ({t.observations} stored, {t.calls} calls)",
            )
        )
    return Chart(
        key="per-observation",
        title="Tokens per stored observation, per day",
        unit="tokens/obs",
        width=WIDTH,
        height=HEIGHT,
        max_value=round(top, 1),
        axis_y=HEIGHT - PLOT_BOTTOM,
        bars=bars,
        first_day=first,
        last_day=last,
        empty=empty,
    )


def _stacked_chart(
    days: dict[str, Totals], stacked: dict[str, tuple[int, int, int]], first: str, last: str,
    empty: bool,
) -> Chart:  # fmt: skip
    top = max((sum(parts) for parts in stacked.values()), default=0)
    slot, width = _slots(len(days))
    bars = []
    for i, (day, parts) in enumerate(stacked.items()):
        base = float(HEIGHT - PLOT_BOTTOM)
        for (part, name, fill), value in zip(PARTS, parts, strict=True):
            if not value:
                continue
            height = _scale(value, top)
            base -= height
            bars.append(
                Bar(
                    day=day,
                    part=part,
                    value=value,
                    x=round(i * slot, 2),
                    y=round(base, 2),
                    width=round(width, 2),
                    height=round(height, 2),
                    fill=fill,
                    label=f"{day}: {value:,} {name} tokens",
                )
            )
    return Chart(
        key="tokens",
        title="Observer tokens per day",
        unit="tokens",
        width=WIDTH,
        height=HEIGHT,
        max_value=top,
        axis_y=HEIGHT - PLOT_BOTTOM,
        bars=bars,
        first_day=first,
        last_day=last,
        empty=empty,
        legend=[(name, fill) for _, name, fill in PARTS],
    )
