"""The web UI's HTML, server-rendered with every stored text escaped; its CSS and script."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from urllib.parse import quote

import msgspec

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


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """What the list shows: a search query and project, session and type filters."""

    q: str = ""
    project: str = ""
    session: str = ""
    type: str = ""


def card(row: StoredRow, types: Mapping[str, TypeLabel]) -> str:
    """One observation or summary as an <article>; the script builds the same from JSON."""
    key = f"{row.kind}-{row.id}"
    if row.kind == "summary":
        mark, label, title = "📋", "Summary", row.request or "Progress summary"
        body = "".join(
            f'<dt>{name}</dt><dd class="{field}">{escape(value)}</dd>'
            for field, name in SUMMARY_FIELDS
            if (value := getattr(row, field))
        )
        details = f'<dl class="summary-fields">{body}</dl>' if body else ""
    else:
        shown = types.get(row.type or "", TypeLabel("•", row.type or "observation"))
        mark, label, title = shown.emoji, shown.label, row.title or "(untitled)"
        details = "".join(
            [
                f'<p class="subtitle">{escape(row.subtitle)}</p>' if row.subtitle else "",
                f'<p class="narrative">{escape(row.narrative)}</p>' if row.narrative else "",
                _list("facts", row.facts),
                _list("concepts", row.concepts),
                _list("files", [*(row.files_read or ()), *(row.files_modified or ())]),
            ]
        )
    session = escape(row.memory_session_id)
    return (
        f'<article class="card {row.kind}" id="row-{key}" data-kind="{row.kind}"'
        f' data-type="{escape(row.type or "summary")}" data-project="{escape(row.project)}"'
        f' data-session="{session}" aria-labelledby="title-{key}">'
        f'<header><span class="type" title="{escape(label)}">'
        f'<span aria-hidden="true">{escape(mark)}</span> {escape(label)}</span>'
        f'<h3 id="title-{key}" class="title">{escape(title)}</h3></header>'
        f"{details}"
        f'<footer><span class="project">{escape(row.project)}</span> · '
        f'<a class="session" href="/sessions/{quote(row.memory_session_id, safe="")}">'
        f"session {session}</a> · "
        f'<time datetime="{escape(row.created_at)}">{escape(row.created_at)}</time> · '
        f"#{row.id}</footer></article>"
    )


def index_page(
    rows: Sequence[StoredRow],
    *,
    filters: Filters,
    types: Mapping[str, TypeLabel],
    sessions: Sequence[SessionRow],
    stats: Mapping[str, object],
    last_event_id: str,
) -> str:
    """The main page: filters and search, the newest rows (live), the operator panel."""
    projects = sorted({s.project for s in sessions} | ({filters.project} - {""}))
    type_options = [("", "All types"), *((k, f"{v.emoji} {v.label}") for k, v in types.items())]
    type_options.append(("summary", "📋 Summary"))
    if filters.q:
        heading = f"Search results for “{escape(filters.q)}”"
    else:
        heading = "Newest observations and summaries"
    items = "".join(card(r, types) for r in rows) or '<p class="empty">Nothing here yet.</p>'
    form = (
        '<form class="filters" method="get" action="/" role="search">'
        '<label>Search <input type="search" name="q" id="q"'
        f' value="{escape(filters.q)}" placeholder="words in title, narrative, facts"></label>'
        f"{_select('project', 'Project', [('', 'All projects'), *((p, p) for p in projects)], filters.project)}"  # noqa: E501
        '<label>Session <input type="text" name="session" id="session"'
        f' value="{escape(filters.session)}" list="session-ids"></label>'
        '<datalist id="session-ids">'
        + "".join(f'<option value="{escape(s.memory_session_id)}">' for s in sessions)
        + "</datalist>"
        f"{_select('type', 'Type', type_options, filters.type)}"
        '<button type="submit">Apply</button> <a href="/">Clear</a></form>'
    )
    body = (
        f"{form}"
        f'<div class="layout"><section aria-labelledby="feed-title">'
        f'<h2 id="feed-title">{heading}</h2>'
        '<p id="live-status" class="status" role="status" aria-live="polite"></p>'
        f'<div id="feed" data-last-event-id="{escape(last_event_id)}"'
        f' data-filters="{escape(msgspec.json.encode(filters).decode())}">{items}</div>'
        f"</section>{_operator_panel(stats)}</div>"
        f"{_card_template()}"
    )
    return layout("memq", body, types)


def session_page(
    session_id: str,
    entries: Sequence[TimelineEntry],
    types: Mapping[str, TypeLabel],
    *,
    last_event_id: str = "",
    events_url: str = "/events",
) -> str:
    """One session: prompts, observations and summaries in order; the session's new rows live."""
    parts: list[str] = []
    for entry in entries:
        if entry.kind == "prompt":
            parts.append(
                f'<article class="prompt" id="prompt-{entry.id}">'
                f"<h3>User prompt #{entry.prompt_number or '?'}</h3>"
                f"<blockquote>{escape(entry.prompt_text or '')}</blockquote>"
                f'<footer><time datetime="{escape(entry.created_at)}">'
                f"{escape(entry.created_at)}</time></footer></article>"
            )
        elif entry.row is not None:
            parts.append(card(entry.row, types))
    items = "".join(parts) or '<p class="empty">No activity stored for this session.</p>'
    # The index's script follows the feed here too: these attributes tell it which session
    # to keep and that new rows go at the end (the timeline is oldest first).
    filters = escape(msgspec.json.encode(Filters(session=session_id)).decode())
    body = (
        f'<p><a href="/">← All observations</a></p>'
        f'<section aria-labelledby="session-title"><h2 id="session-title">Session '
        f"<code>{escape(session_id)}</code></h2>"
        '<p id="live-status" class="status" role="status" aria-live="polite"></p>'
        f'<div id="feed" class="timeline" data-order="oldest-first"'
        f' data-events="{escape(events_url)}" data-last-event-id="{escape(last_event_id)}"'
        f' data-filters="{filters}">{items}</div></section>'
        f"{_card_template()}"
    )
    return layout(f"memq · session {session_id}", body, types)


def layout(title: str, body: str, types: Mapping[str, TypeLabel]) -> str:
    """The page shell: header, main, stylesheet and script (no inline script or style)."""
    labels = {k: [v.emoji, v.label] for k, v in types.items()}
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>"
        '<link rel="stylesheet" href="/app.css"><script src="/app.js" defer></script></head>'
        f'<body data-types="{escape(msgspec.json.encode(labels).decode())}">'
        '<a class="skip" href="#main">Skip to content</a>'
        '<header class="top"><h1><a href="/">memq</a></h1>'
        "<p>Memories from your coding agents, live.</p></header>"
        f'<main id="main">{body}</main></body></html>'
    )


def _operator_panel(stats: Mapping[str, object]) -> str:
    return (
        '<aside class="ops" aria-labelledby="ops-title"><h2 id="ops-title">Operator panel</h2>'
        f'<dl id="stats">{stats_items(stats)}</dl></aside>'
    )


def stats_items(stats: Mapping[str, object]) -> str:
    """The operator panel's figures as <dt>/<dd> pairs."""
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
    pairs = [
        ("Pending events", "pending", "—" if pending is None else str(pending)),
        ("Oldest pending", "oldest", "—" if oldest is None else f"{oldest} s"),
        (
            "Paused providers",
            "paused",
            ", ".join(map(str, paused)) if isinstance(paused, list) and paused else "none",
        ),
        ("Dead letters", "dead", str(stats.get("dead_letters", "—"))),
        ("Outcomes", "outcomes", counts or "—"),
    ]
    return "".join(
        f'<dt>{name}</dt><dd data-stat="{key}">{escape(value)}</dd>' for name, key, value in pairs
    )


def _list(name: str, values: Sequence[str] | None) -> str:
    if not values:
        return ""
    items = "".join(f"<li>{escape(v)}</li>" for v in values)
    return f'<ul class="{name}" aria-label="{name}">{items}</ul>'


def _select(name: str, label: str, options: Sequence[tuple[str, str]], current: str) -> str:
    rendered = "".join(
        f'<option value="{escape(v)}"{" selected" if v == current else ""}>{escape(text)}</option>'
        for v, text in options
    )
    return f'<label>{label} <select name="{name}" id="{name}">{rendered}</select></label>'


def _card_template() -> str:
    # Filled by the script with textContent only: live rows are never parsed as HTML.
    return (
        '<template id="card-template"><article class="card">'
        '<header><span class="type"><span aria-hidden="true" class="mark"></span> '
        '<span class="label"></span></span><h3 class="title"></h3></header>'
        '<div class="details"></div>'
        '<footer><span class="project"></span> · <a class="session"></a> · <time></time> · '
        '<span class="rowid"></span></footer></article></template>'
    )
