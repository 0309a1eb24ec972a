"""The web UI's HTML from its Jinja2 templates, every stored text escaped (autoescape)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import jinja2
import msgspec

from worker.fanout.ui.charts import cost_charts
from worker.fanout.ui.filters import Filters
from worker.ops.cost import Cost
from worker.storage.index_records import TimelineEntry
from worker.storage.records import SessionRow, StoredRow

SUMMARY_FIELDS = (
    ("investigated", "Investigated"),
    ("learned", "Learned"),
    ("completed", "Completed"),
    ("next_steps", "Next steps"),
    ("notes", "Notes"),
)


class TypeLabel(msgspec.Struct, frozen=True):
    """How a type shows on a card: the mode's emoji and label."""

    emoji: str
    label: str


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("worker.fanout.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt name fails the render, not shows blank
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.globals["summary_fields"] = SUMMARY_FIELDS
    # A session id is one path segment: "/" in it must not start another.
    env.filters["path_segment"] = lambda value: quote(str(value), safe="")
    return env


class Pages:
    """Renders the pages and the fragments the browser inserts (a card, the panel figures)."""

    def __init__(self, types: Mapping[str, TypeLabel]) -> None:
        self.types = dict(types)
        self.env = _environment()
        self._card = self.env.get_template("card.html").module.card  # type: ignore[attr-defined]

    def card(self, row: StoredRow) -> str:
        """One observation or summary as an <article>: the same HTML on a page and live."""
        return str(self._card(row, self.types))

    def index(
        self,
        rows: Sequence[StoredRow],
        *,
        filters: Filters,
        sessions: Sequence[SessionRow],
        stats: Mapping[str, object],
        last_event_id: str,
        events_url: str | None,
    ) -> str:
        """The main page: filters and search, the newest rows (live), the operator panel."""
        projects = sorted({s.project for s in sessions} | ({filters.project} - {""}))
        type_options = [
            ("", "All types"),
            *((k, f"{v.emoji} {v.label}") for k, v in self.types.items()),
            ("summary", "📋 Summary"),
        ]
        return self.env.get_template("index.html").render(
            rows=rows,
            filters=filters,
            types=self.types,
            sessions=sessions,
            project_options=[("", "All projects"), *((p, p) for p in projects)],
            type_options=type_options,
            **panel(stats, filters.project or None),
            last_event_id=last_event_id,
            events_url=events_url,
        )

    def session(
        self,
        session_id: str,
        entries: Sequence[TimelineEntry],
        *,
        last_event_id: str,
        events_url: str | None,
    ) -> str:
        """One session: prompts, observations and summaries in order; its new rows live."""
        return self.env.get_template("session.html").render(
            session_id=session_id,
            entries=entries,
            types=self.types,
            last_event_id=last_event_id,
            events_url=events_url,
        )

    def stats(self, stats: Mapping[str, object], project: str | None = None) -> str:
        """The operator panel's figures as <dt>/<dd> pairs, its cost charts of `project`
        (all projects when None)."""
        return self.env.get_template("stats.html").render(**panel(stats, project))


def panel(stats: Mapping[str, object], project: str | None) -> dict[str, Any]:
    """What stats.html renders: the figures, the cost charts and the project-day table."""
    cost = stats.get("cost")
    cost = cost if isinstance(cost, dict) else None
    days = [] if cost is None else list(reversed(cost["days"]))  # newest first
    return {
        "pairs": stat_pairs(stats),
        "charts": cost_charts(None if cost is None else msgspec.convert(cost, Cost), project),
        "cost_project": project,
        "cost_days": [d for d in days if project is None or d["project"] == project],
        "priced": cost is not None and cost["prices"] is not None,
    }


def stat_pairs(stats: Mapping[str, object]) -> list[tuple[str, str, str]]:
    """The operator panel's figures from `memq stats` JSON: (label, key, shown value)."""
    streams = stats.get("streams")
    outcomes = stats.get("outcomes")
    pending = streams.get("pending") if isinstance(streams, dict) else None
    oldest = streams.get("oldest_pending_age_s") if isinstance(streams, dict) else None
    paused = stats.get("paused_providers") or []
    counts = (
        ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()) if ":" not in k)
        if isinstance(outcomes, dict)
        else ""
    )
    return [
        ("Pending events", "pending", "—" if pending is None else str(pending)),
        ("Oldest pending", "oldest", "—" if oldest is None else f"{oldest} s"),
        (
            "Paused providers",
            "paused",
            ", ".join(map(str, paused)) if isinstance(paused, list) and paused else "none",
        ),
        ("Dead letters", "dead", str(stats.get("dead_letters", "—"))),
        ("Outcomes", "outcomes", counts or "—"),
        *_cost_pairs(stats.get("cost")),
    ]


def _cost_pairs(cost: object) -> list[tuple[str, str, str]]:
    """The cost figures of `memq stats`: tokens per stored observation, totals, spend."""
    if not isinstance(cost, dict):
        return []
    window = f"{cost['window_days']} d, all projects"
    per = cost["per_observation"]
    per_text = (
        f"input {per['input_tokens']:,.0f} · cached {per['cached_input_tokens']:,.0f}"
        f" · output {per['output_tokens']:,.0f}"
        if per
        else "no observation stored"
    )
    pairs = [
        (f"Tokens per observation ({window})", "tokens-per-observation", per_text),
        (
            f"Observer tokens ({window})",
            "cost-tokens",
            f"input {cost['input_tokens']:,} · cached {cost['cached_input_tokens']:,}"
            f" · output {cost['output_tokens']:,} in {cost['calls']:,} calls,"
            f" {cost['observations']:,} observations",
        ),
    ]
    if cost["spend"] is not None:
        pairs.append((f"Observer spend ({window})", "spend", f"{cost['spend']:.4f}"))
    if cost.get("reported_cost_usd") is not None:
        reported = f"USD {cost['reported_cost_usd']:.4f}"
        pairs.append((f"Cost the observer reported ({window})", "reported-cost", reported))
    return pairs
