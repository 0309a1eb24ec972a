"""The operator panel's cost figures and SVG charts: valid XML, proportional, escaped."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime
from pathlib import Path

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis

from tests.support.feed_rows import observation
from tests.support.ui_harness import running_ui, ui_settings
from worker.fanout.ui import charts
from worker.fanout.ui.pages import Pages
from worker.ops.cost import Prices, build_cost
from worker.storage.records import BatchWrite, CostDay, TokenUsage
from worker.storage.sqlite.store import SqliteStore

TODAY = date(2026, 5, 14)
HOSTILE = '"><script>alert(1)</script>'
SVG = "{http://www.w3.org/2000/svg}"


def _day(project: str, day: str, tokens: int, calls: int, observations: int) -> CostDay:
    return CostDay(
        project=project,
        day=day,
        input_tokens=tokens,
        cached_input_tokens=tokens // 4,
        output_tokens=tokens // 10,
        calls=calls,
        observations=observations,
    )


def _panel(days: list[CostDay], project: str | None = None, prices: Prices | None = None) -> str:
    cost = build_cost(days, today=TODAY, days=14, prices=prices)
    stats = {"streams": {}, "outcomes": {}, "cost": msgspec.to_builtins(cost)}
    return Pages({}).stats(stats, project)


def _figures(html: str) -> dict[str, ET.Element]:
    """Each chart's <figure>, parsed as XML (which fails on anything not well-formed)."""
    found = re.findall(r'<figure class="chart".*?</figure>', html, re.DOTALL)
    figures = [ET.fromstring(f) for f in found]
    return {f.attrib["data-chart"]: f for f in figures}


def _bars(figure: ET.Element) -> list[dict[str, str]]:
    svg = figure.find(f"{SVG}svg")
    assert svg is not None
    return [rect.attrib for rect in svg.iter(f"{SVG}rect")]


def test_bars_are_proportional_to_their_values() -> None:
    html = _panel(
        [
            _day("alpha", "2026-05-12", 3000, 2, 1),  # 3300 tokens per observation
            _day("alpha", "2026-05-13", 4000, 3, 4),  # 1100
            _day("beta", "2026-05-13", 800, 1, 0),
            _day("alpha", "2026-05-14", 1000, 1, 0),  # no observation: no bar
        ]
    )
    figures = _figures(html)
    assert set(figures) == {"per-observation", "tokens"}
    per_obs = {b["data-day"]: b for b in _bars(figures["per-observation"])}
    assert set(per_obs) == {"2026-05-12", "2026-05-13"}
    # Both projects: (4000 + 400 + 800 + 80) / 4 observations on the 13th.
    assert float(per_obs["2026-05-13"]["data-value"]) == 1320.0
    assert float(per_obs["2026-05-12"]["data-value"]) == 3300.0
    ratio = float(per_obs["2026-05-13"]["height"]) / float(per_obs["2026-05-12"]["height"])
    assert ratio == pytest.approx(1320 / 3300, abs=1e-3)
    stacked = _bars(figures["tokens"])
    assert {b["data-part"] for b in stacked} == {"input", "cached", "output"}
    unit = float(stacked[0]["height"]) / float(stacked[0]["data-value"])
    for bar in stacked:
        assert float(bar["height"]) == pytest.approx(float(bar["data-value"]) * unit, abs=0.02)
    on_12th = [b for b in stacked if b["data-day"] == "2026-05-12"]
    # Stacked from the axis up: uncached input, cached input, output, each on the one below.
    assert [b["data-part"] for b in on_12th] == ["input", "cached", "output"]
    assert [int(b["data-value"]) for b in on_12th] == [2250, 750, 300]
    for below, above in itertools.pairwise(on_12th):
        top = float(above["y"]) + float(above["height"])
        assert top == pytest.approx(float(below["y"]), abs=0.02)
    # The 13th (5280 tokens, both projects) is the tallest stack: it reaches the plot's top.
    top_bar = min(stacked, key=lambda b: float(b["y"]))
    assert (top_bar["data-day"], top_bar["data-part"]) == ("2026-05-13", "output")
    assert float(top_bar["y"]) == pytest.approx(charts.HEIGHT - charts.PLOT_BOTTOM - charts.PLOT)


def test_one_project_charts_only_its_days() -> None:
    days = [_day("alpha", "2026-05-13", 1000, 1, 2), _day("beta", "2026-05-13", 9000, 1, 1)]
    bars = _bars(_figures(_panel(days, "beta"))["per-observation"])
    assert [float(b["data-value"]) for b in bars] == [9900.0]
    assert "Observer cost of beta" in _panel(days, "beta")


def test_empty_data_says_no_data() -> None:
    html = _panel([])
    for figure in _figures(html).values():
        assert _bars(figure) == []
        texts = [t.text for t in figure.iter(f"{SVG}text")]
        assert texts == ["no data"]
    assert "no observation stored" in html
    # Calls but no observation: the tokens chart has bars, the per-observation one has none.
    figures = _figures(_panel([_day("alpha", "2026-05-14", 100, 1, 0)]))
    assert [t.text for t in figures["per-observation"].iter(f"{SVG}text")] == ["no data"]
    assert len(_bars(figures["tokens"])) == 3


def test_project_names_are_escaped_in_the_charts_and_the_table() -> None:
    days = [_day(HOSTILE, "2026-05-13", 1000, 1, 1)]
    for html in (_panel(days), _panel(days, HOSTILE)):
        assert "<script>" not in html
        assert "&lt;script&gt;" in html
        _figures(html)  # still well-formed


def test_spend_shows_only_with_prices() -> None:
    days = [_day("alpha", "2026-05-13", 1_000_000, 1, 1)]
    assert 'data-stat="spend"' not in _panel(days)
    priced = _panel(days, prices=Prices(input=3, cached_input=0.3, output=15))
    # 750k uncached at 3, 250k cached at 0.3, 100k output at 15 per million.
    assert re.search(r'<dd data-stat="spend">3\.8250</dd>', priced)
    assert '<th scope="col">Spend</th>' in priced


async def test_the_page_and_the_partial_draw_the_stored_cost(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, store: SqliteStore
) -> None:
    now = datetime.now(UTC)
    for project, tokens in (("alpha", 2000), ("beta", 600)):
        obs = msgspec.structs.replace(observation(1, project=project), created_at=now)
        usage = TokenUsage(
            memory_session_id=f"s-{project}",
            project=project,
            provider="anthropic",
            model="m",
            input_tokens=tokens,
            cached_input_tokens=0,
            output_tokens=0,
            created_at=now,
        )
        await store.write_batch(
            BatchWrite(
                memory_session_id=f"s-{project}",
                project=project,
                fence=1,
                event_ids=[],
                observations=[msgspec.structs.replace(obs, memory_session_id=f"s-{project}")],
                usage=[usage],
            )
        )
    settings = ui_settings(tmp_path, redis_url, price_input_per_mtok="2",
                           price_cached_per_mtok="1", price_output_per_mtok="4")  # fmt: skip
    async with running_ui(settings) as url, httpx.AsyncClient(base_url=url) as client:
        page = (await client.get("/")).text
        partial = (await client.get("/partials/stats")).text
        alpha = (await client.get("/partials/stats", params={"project": "alpha"})).text
        api = (await client.get("/api/stats")).json()
    panel = re.search(r'<dl id="stats">\n(.*?)</dl>', page, re.DOTALL)
    assert panel is not None
    assert panel.group(1) == partial
    today = now.date().isoformat()
    both = _bars(_figures(partial)["per-observation"])
    assert [(b["data-day"], float(b["data-value"])) for b in both] == [(today, 1300.0)]
    one = _bars(_figures(alpha)["per-observation"])
    assert [float(b["data-value"]) for b in one] == [2000.0]
    assert api["cost"]["observations"] == 2
    assert api["cost"]["spend"] == pytest.approx(2600 * 2 / 1_000_000)
    assert 'data-stat="spend"' in partial
