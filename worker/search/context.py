"""The context a new agent session starts with: latest summary + relevant recent observations."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Literal

import msgspec

from worker.search.freshness import BUDGET_S, Freshness, changed_note
from worker.search.notes import NOTES_CLOSE, NOTES_OPEN, as_data
from worker.settings import Settings
from worker.storage.protocol import ReadStore
from worker.storage.records import StoredRow

DEFAULT_LIMIT = 20
CANDIDATES = 100
# Over the newest CANDIDATES observations, relevance = type weight x recency (halving every
# HALF_LIFE newer observations): a week-old decision can outrank today's routine change.
HALF_LIFE = 25
TYPE_WEIGHT = {
    "decision": 1.0,
    "security_alert": 1.0,
    "bugfix": 0.9,
    "security_note": 0.8,
    "feature": 0.8,
    "discovery": 0.7,
    "refactor": 0.6,
    "change": 0.6,
}
OTHER_WEIGHT = 0.5
NARRATIVE_CHARS = 280
SUMMARY_FIELD_CHARS = 600
# `prefer`: stale observations only fill what fresh ones leave; `fresh_only`: never shown.
StaleChoice = Literal["prefer", "fresh_only"]
SUMMARY_FIELDS = (
    ("request", "Request"),
    ("completed", "Completed"),
    ("learned", "Learned"),
    ("investigated", "Investigated"),
    ("next_steps", "Next steps"),
    ("notes", "Notes"),
)
# Of a project name in a heading or message: a 100,000-character name once made a 100 KB answer.
PROJECT_SHOWN_CHARS = 200


class Context(msgspec.Struct, frozen=True, kw_only=True):
    """What `memq context --json` prints; `markdown` is empty when nothing is stored yet."""

    project: str
    summary: StoredRow | None
    observations: list[StoredRow]
    markdown: str
    stale_left_out: int = 0
    """Observations relevant enough to show but left out: their files changed since."""


class Chosen(msgspec.Struct, frozen=True, kw_only=True):
    """What a context shows before its budget: the summary and the observations picked."""

    summary: StoredRow | None
    observations: list[StoredRow]
    stale_left_out: int


async def choose_context(
    store: ReadStore,
    project: str,
    *,
    limit: int = DEFAULT_LIMIT,
    freshness: Freshness | None = None,
    stale: StaleChoice = "prefer",
) -> Chosen:
    """The project's latest summary and most relevant recent observations (the store reads).

    With `freshness`, observations whose files changed since are marked and preferred less.
    """
    summary = await store.latest_summary(project)
    recent = [
        r
        for r in await store.observations(project=project, limit=CANDIDATES)
        if r.kind == "observation"
    ]
    if freshness is not None:
        recent = freshness.mark(recent)
    chosen, left_out = pick_fresh(recent, limit, stale)
    return Chosen(summary=summary, observations=chosen, stale_left_out=left_out)


def fit_context(project: str, chosen: Chosen, budget_chars: int) -> Context:
    """The chosen context rendered within `budget_chars`."""
    markdown, shown = render(
        project, chosen.summary, chosen.observations, budget_chars, chosen.stale_left_out
    )
    return Context(
        project=project,
        summary=chosen.summary,
        observations=shown,
        markdown=markdown,
        stale_left_out=chosen.stale_left_out,
    )


async def build_context(
    store: ReadStore,
    project: str,
    *,
    limit: int = DEFAULT_LIMIT,
    budget_chars: int = 8000,
    freshness: Freshness | None = None,
    stale: StaleChoice = "prefer",
) -> Context:
    """The project's latest summary and its most relevant recent observations, within budget."""
    chosen = await choose_context(store, project, limit=limit, freshness=freshness, stale=stale)
    return fit_context(project, chosen, budget_chars)


def pick_fresh(
    newest_first: list[StoredRow], limit: int, stale: StaleChoice
) -> tuple[list[StoredRow], int]:
    """pick_relevant, stale rows only filling the places fresh ones leave (never, if
    `fresh_only`); and how many stale rows of the plain pick were left out."""
    fresh = [r for r in newest_first if not r.stale_files]
    if len(fresh) == len(newest_first):
        return pick_relevant(newest_first, limit), 0
    chosen = pick_relevant(fresh, limit)
    if stale == "prefer" and len(chosen) < limit:
        stale_rows = [r for r in newest_first if r.stale_files]
        extra = {id(r) for r in pick_relevant(stale_rows, limit - len(chosen))}
        taken = {id(r) for r in chosen} | extra
        chosen = [r for r in newest_first if id(r) in taken]
    shown = {id(r) for r in chosen}
    plain = pick_relevant(newest_first, limit)
    return chosen, sum(1 for r in plain if r.stale_files and id(r) not in shown)


def pick_relevant(newest_first: list[StoredRow], limit: int) -> list[StoredRow]:
    """The `limit` best by type weight x recency, returned newest first."""
    scored = [
        (TYPE_WEIGHT.get(row.type or "", OTHER_WEIGHT) * 0.5 ** (age / HALF_LIFE), age, row)
        for age, row in enumerate(newest_first)
    ]
    best = sorted(scored, key=lambda s: (-s[0], s[1]))[:limit]
    return [row for _, _, row in sorted(best, key=lambda s: s[1])]


def render(
    project: str,
    summary: StoredRow | None,
    observations: list[StoredRow],
    budget_chars: int,
    stale_left_out: int = 0,
) -> tuple[str, list[StoredRow]]:
    """Markdown within `budget_chars`, and the observations that fit (newest first).

    The Markdown sits inside a labelled <memq-notes> block that says it is data, not
    instructions; every stored text in it is one line, and cannot close the block.
    """
    if summary is None and not observations and not stale_left_out:
        return "", []
    budget_chars -= len(NOTES_OPEN) + len(NOTES_CLOSE) + 2
    parts = [f"# memq: what happened recently in {as_data(project, PROJECT_SHOWN_CHARS)}\n"]
    if summary is not None:
        parts.append(f"\n## Latest summary ({_when(summary.created_at)})\n")
        for field, label in SUMMARY_FIELDS:
            value = getattr(summary, field)
            if value and value.strip():
                parts.append(f"- **{label}:** {as_data(value, SUMMARY_FIELD_CHARS)}\n")
    text = _fit("".join(parts), budget_chars)
    shown: list[StoredRow] = []
    if stale_left_out and not observations:
        text = _fit(text + f"\n({_left_out(stale_left_out)})\n", budget_chars)
    if observations:
        heading = "\n## Recent observations\n"
        if stale_left_out:
            heading += f"({_left_out(stale_left_out)})\n"
        for row in observations:
            item = _observation(row)
            if len(text) + len(heading) * (not shown) + len(item) > budget_chars:
                break
            text += (heading if not shown else "") + item
            shown.append(row)
    return f"{NOTES_OPEN}\n{text.rstrip()}\n{NOTES_CLOSE}", shown


def _left_out(count: int) -> str:
    rows = "observation" if count == 1 else "observations"
    return f"left out {count} {rows} about files changed since"


def _observation(row: StoredRow) -> str:
    title = as_data(row.title or "(untitled)")
    subtitle = f" — {as_data(row.subtitle)}" if row.subtitle else ""
    note = changed_note(row.stale_files)
    changed = f" {as_data(note)}" if note else ""
    line = f"- **#{row.id} {row.type}** {title}{subtitle} ({_when(row.created_at)[:10]}){changed}\n"
    detail = row.narrative or "; ".join(row.facts or [])
    if detail.strip():
        line += f"  {as_data(detail, NARRATIVE_CHARS)}\n"
    return line


def _when(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return iso


def _fit(text: str, budget: int) -> str:
    return text if len(text) <= budget else text[: budget - 2].rstrip() + "…\n"


def session_start_output(
    settings: Settings, project: str, timeout_s: float, cwd: str | None = None
) -> str:
    """Claude Code's SessionStart hook output injecting the context; "" when there is none.

    Never raises and never waits past `timeout_s`: storage that is missing, locked or broken
    means no context, not a failing or slow agent start.
    """
    from worker.storage.factory import open_store
    from worker.storage.sqlite.store import SqliteStore

    async def read() -> str:
        store = open_store(settings)
        if isinstance(store, SqliteStore) and not store.path.exists():
            return ""  # nothing stored yet; do not create the database from a hook
        try:
            return (
                await build_context(
                    store,
                    project,
                    limit=DEFAULT_LIMIT,
                    budget_chars=settings.context_chars,
                    freshness=Freshness.here(
                        cwd, project=settings.project, budget_s=min(BUDGET_S, timeout_s / 3)
                    ),
                )
            ).markdown
        finally:
            await store.aclose()

    try:
        markdown = asyncio.run(asyncio.wait_for(read(), max(0.01, timeout_s)))
    except Exception:  # the agent host must start whatever storage does
        return ""
    if not markdown:
        return ""
    output = {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": markdown}
    }
    return json.dumps(output) + "\n"
