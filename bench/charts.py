"""SVG bar charts for the benchmark docs, written by the bench scripts from their own results.

Plain SVG (no plotting library, no JavaScript): GitHub and any Markdown viewer show it inline.
One chart is a set of groups (e.g. a corpus, a fault), each a row of labelled bars on one
horizontal value axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

# Colour-blind-safe palette (Okabe & Ito's), one colour per series.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
LABEL_W = 230
BAR_H = 18
GAP = 6
GROUP_GAP = 14
PLOT_W = 420
VALUE_W = 90
TITLE_H = 34
AXIS_H = 30


@dataclass(frozen=True)
class Bar:
    """One bar: its label, its value and which series (colour) it belongs to."""

    label: str
    value: float
    series: int = 0


@dataclass(frozen=True)
class Group:
    """A heading and its bars."""

    heading: str
    bars: Sequence[Bar]


def nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above value (the axis' end); 1 for nothing."""
    if value <= 0 or math.isnan(value):
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        top = step * 10.0**exponent
        if top >= value:
            return top
    return 10.0 ** (exponent + 1)  # pragma: no cover - the loop always returns


def _fmt(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:,.2f}" if value < 10 else f"{value:,.1f}"


def bar_chart(title: str, unit: str, groups: Sequence[Group], *, log: bool = False) -> str:
    """The SVG text of a horizontal bar chart; bar lengths are proportional to their values
    (to their logarithms with `log`, for values that span orders of magnitude)."""
    values = [b.value for g in groups for b in g.bars]
    top = nice_max(max(values, default=0.0))
    positive = [v for v in values if v > 0]
    low = 10.0 ** math.floor(math.log10(min(positive))) if log and positive else 0.0
    if log and positive:  # whole decades, so every tick is a power of ten
        top = max(10.0 ** math.ceil(math.log10(max(positive))), low * 10)

    def scale(value: float) -> float:
        if not log:
            return PLOT_W * max(value, 0.0) / top
        return PLOT_W * math.log10(max(value, low) / low) / math.log10(top / low)

    height = TITLE_H + AXIS_H
    for g in groups:
        height += BAR_H + len(g.bars) * (BAR_H + GAP) + GROUP_GAP
    width = LABEL_W + PLOT_W + VALUE_W
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="8" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    y = TITLE_H
    for g in groups:
        out.append(f'<text x="8" y="{y + 13}" font-weight="bold">{escape(g.heading)}</text>')
        y += BAR_H
        for b in g.bars:
            length = scale(b.value)
            colour = PALETTE[b.series % len(PALETTE)]
            out.append(f'<text x="{LABEL_W - 6}" y="{y + 13}" text-anchor="end">'
                       f"{escape(b.label)}</text>")  # fmt: skip
            out.append(
                f'<rect class="bar" x="{LABEL_W}" y="{y}" width="{length:.1f}" height="{BAR_H}" '
                f'fill="{colour}"><title>{escape(b.label)}: {_fmt(b.value)} {escape(unit)}'
                "</title></rect>"
            )
            out.append(f'<text x="{LABEL_W + length + 4:.1f}" y="{y + 13}">{_fmt(b.value)}</text>')
            y += BAR_H + GAP
        y += GROUP_GAP
    if log:
        ticks = [low * 10.0**k for k in range(round(math.log10(top / low)) + 1)]
    else:
        ticks = [top * i / 4 for i in range(5)]
    for tick in ticks:
        x = LABEL_W + scale(tick)
        out.append(f'<line x1="{x:.1f}" y1="{TITLE_H}" x2="{x:.1f}" y2="{y}" stroke="#ccc"/>')
        out.append(f'<text x="{x:.1f}" y="{y + 14}" text-anchor="middle" fill="#555">'
                   f"{_fmt(tick)}</text>")  # fmt: skip
    axis = f"{unit} (log scale)" if log else unit
    out.append(f'<text x="{LABEL_W + PLOT_W / 2}" y="{y + 28}" text-anchor="middle" '
               f'fill="#555">{escape(axis)}</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_chart(
    path: Path, title: str, unit: str, groups: Sequence[Group], *, log: bool = False
) -> Path:
    """Write the chart to path (its folder made if missing); returns path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(bar_chart(title, unit, groups, log=log))
    return path
