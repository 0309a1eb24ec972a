"""Benchmark charts: bar lengths follow the values; the docs' charts are the benches' own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.charts import PLOT_W, Bar, Group, bar_chart, nice_max

REPO = Path(__file__).resolve().parents[2]
_BAR = re.compile(r'<rect class="bar" [^>]*width="([0-9.]+)"')
_TICK = re.compile(r'text-anchor="middle" fill="#555">([0-9,.]+)</text>')


def _widths(svg: str) -> list[float]:
    return [float(w) for w in _BAR.findall(svg)]


@pytest.mark.parametrize(("value", "top"), [(0.3, 0.5), (1, 1), (7, 10), (120, 200), (2001, 5000)])
def test_the_axis_ends_at_a_round_number_at_or_above_the_largest_value(
    value: float, top: float
) -> None:
    assert nice_max(value) == pytest.approx(top)


def test_bar_lengths_are_proportional_to_the_values() -> None:
    svg = bar_chart("t", "ms", [Group("g", [Bar("a", 50), Bar("b", 100), Bar("c", 25, 1)])])
    assert _widths(svg) == pytest.approx([PLOT_W / 2, PLOT_W, PLOT_W / 4])


def test_a_log_chart_spaces_decades_evenly_and_labels_them() -> None:
    svg = bar_chart("t", "tokens", [Group("g", [Bar("a", 100), Bar("b", 10_000)])], log=True)
    assert _widths(svg) == pytest.approx([0.0, PLOT_W])
    assert _TICK.findall(svg) == ["100", "1,000", "10,000"]
    assert "(log scale)" in svg


def test_labels_are_escaped() -> None:
    svg = bar_chart("<t>", "u", [Group("a & b", [Bar("wait <= 30 s", 1)])])
    assert "wait &lt;= 30 s" in svg
    assert "a &amp; b" in svg
    assert "<t>" not in svg


def test_the_docs_token_chart_is_what_bench_tokens_draws_today(tmp_path: Path) -> None:
    chart = tmp_path / "tokens.svg"
    subprocess.run(
        [sys.executable, "bench/tokens.py", "--chart", str(chart)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    committed = REPO / "docs" / "charts" / "tokens.svg"
    assert chart.read_text() == committed.read_text(), (
        "docs/charts/tokens.svg is stale: run bench/tokens.py --chart docs/charts/tokens.svg"
    )
