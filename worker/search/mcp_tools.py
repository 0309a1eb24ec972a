"""What each `memq mcp` tool answers, over the store: compact, bounded text framed as data."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from worker.errors import WorkerError
from worker.search.context import PROJECT_SHOWN_CHARS, choose_context, fit_context
from worker.search.freshness import Freshness, changed_note
from worker.search.hybrid import RowKey, SearchHit, VectorSearch, ref, row_key, search
from worker.search.mcp_text import bounded, cell, counted, cut_line
from worker.search.notes import as_data
from worker.settings import Settings
from worker.storage.factory import open_store
from worker.storage.index_records import TextFilter, TimelineEntry
from worker.storage.protocol import Store, StoreError
from worker.storage.records import StoredRow
from worker.storage.sqlite.store import SqliteStore

MAX_IDS = 100
MATCHES, ROWS, ENTRIES = ("match", "matches"), ("row", "rows"), ("entry", "entries")
TIMELINE_ENTRIES = 100_000  # a session's whole timeline: `around` must find its row in it
PROMPT_CHARS = 300
SEARCH_HEADER = (
    "| id | kind | type | title | project | session | date | snippet |\n"
    "|---|---|---|---|---|---|---|---|\n"
)
SEARCH_FOOTER = (
    'Fetch the full rows with get_observations (ids as listed, e.g. [12, "summary:3"]);'
    " see what happened around one with timeline (around=<id>).\n"
)
NO_MATCH_FOOTER = "Nothing matched: try other or fewer words, or drop a filter.\n"
# The row fields shown as the heading of a full row, not again in its list.
# file_hashes: what stale_files is computed from, not worth a model's tokens.
_HEADING_FIELDS = frozenset(
    {"kind", "id", "memory_session_id", "project", "created_at", "type", "file_hashes"}
)


class ToolInputError(WorkerError):
    """A tool's arguments are unusable; the message says what to send instead."""


class StorageMissingError(StoreError):
    """No memq database exists where the settings point."""


def open_reader(settings: Settings) -> Store:
    """The store `memq search` reads; StorageMissingError rather than creating a database."""
    store = open_store(settings)
    if isinstance(store, SqliteStore) and not store.path.exists():
        raise StorageMissingError(
            f"no memq database at {store.path}: run `memq worker` (or `memq up`) so tool calls"
            " get stored, or point MEMQ_DATA_DIR / MEMQ_DATABASE_URL at the existing one"
        )
    return store


async def search_index(
    store: Store,
    query: str,
    *,
    filters: TextFilter,
    limit: int,
    max_chars: int,
    vectors: VectorSearch | None = None,
    vectors_off_reason: str = "vector index off (MEMQ_CHROMA=off)",
    freshness: Freshness,
) -> str:
    """A compact table of matches (id, kind, type, title, project, session, date, snippet)."""
    result = await search(
        store, query, filters=filters, limit=limit, vectors=vectors,
        vectors_off_reason=vectors_off_reason,
        stale_files=freshness.stale_files,
    )  # fmt: skip
    head = f"{counted(len(result.hits), MATCHES)} for {as_data(query)!r}"
    head += f" (note: {result.notice})\n" if result.notice else "\n"
    if not result.hits:
        return bounded(head, [], footer=NO_MATCH_FOOTER, max_chars=max_chars, cut_note=_never)
    rows = [_hit_row(h) for h in result.hits]

    def note(shown: int, shortened: bool) -> str:
        advice = "narrow the query or its filters to see the others"
        return cut_line(max_chars, shown, shortened, len(rows), MATCHES, advice)

    return bounded(
        head + SEARCH_HEADER, rows, footer=SEARCH_FOOTER, max_chars=max_chars, cut_note=note
    )


async def observations_text(
    store: Store, ids: Sequence[int | str], *, max_chars: int, freshness: Freshness
) -> str:
    """The full stored rows of observation ids and `summary:<id>` refs, in the order asked."""
    keys = list(dict.fromkeys(parse_ref(i) for i in ids))
    if not keys:
        raise ToolInputError("ids is empty: give ids as search lists them, e.g. [12, 'summary:3']")
    if len(keys) > MAX_IDS:
        raise ToolInputError(f"{len(keys)} ids: ask for at most {MAX_IDS} in one call")
    rows = freshness.mark(await store.rows_by_keys(keys))
    found = {(r.kind, r.id) for r in rows}
    missing = [ref(k) for k in keys if k not in found]
    head = (
        f"{len(rows)} of {counted(len(keys), ROWS)} asked for"
        if missing
        else counted(len(rows), ROWS)
    )
    head += f"; not stored: {', '.join(missing)}\n" if missing else "\n"
    items = [_full_row(r) for r in rows]

    def note(shown: int, shortened: bool) -> str:
        rest = [ref((r.kind, r.id)) for r in rows[shown + shortened :]]
        listed = ", ".join(rest[:20]) + (", …" if len(rest) > 20 else "")
        advice = f"fetch the rest in another call: {listed}" if rest else "the row is too long"
        return cut_line(max_chars, shown, shortened, len(rows), ROWS, advice)

    return bounded(head, items, footer="", max_chars=max_chars, cut_note=note)


async def timeline_text(
    store: Store,
    *,
    session: str | None,
    around: int | str | None,
    before: int,
    after: int,
    max_chars: int,
    freshness: Freshness,
) -> str:
    """A session's prompts, observations and summaries in order, one line each."""
    if (session is None) == (around is None):
        raise ToolInputError("give either session (a session id) or around (an id), not both")
    key = None if around is None else parse_ref(around)
    if key is not None:
        rows = await store.rows_by_keys([key])
        if not rows:
            raise ToolInputError(f"no {key[0]} with id {key[1]}: use an id search listed")
        session = rows[0].memory_session_id
    session = session or ""
    entries = await store.timeline(session, TIMELINE_ENTRIES)
    if not entries:
        raise ToolInputError(f"no session {as_data(session, 80)!r}: use a session id search listed")
    total, first = len(entries), 0
    if key is not None:
        at = next((i for i, e in enumerate(entries) if (e.kind, e.id) == key), 0)
        first = max(0, at - before)
        entries = entries[first : at + after + 1]
    entries = freshness.mark_timeline(entries)
    head = f"session {as_data(session)}: entries {first + 1}-{first + len(entries)} of {total}\n"
    lines = [_timeline_line(e, (e.kind, e.id) == key) for e in entries]

    def note(shown: int, shortened: bool) -> str:
        advice = "ask with around=<an id near the end> and before/after for the rest"
        return cut_line(max_chars, shown, shortened, len(lines), ENTRIES, advice)

    return bounded(head, lines, footer="", max_chars=max_chars, cut_note=note)


async def context_text(
    store: Store,
    project: str,
    *,
    context_chars: int,
    max_chars: int,
    freshness: Freshness,
) -> str:
    """`memq context`'s Markdown (already a notes block), within both budgets; says when
    MEMQ_MCP_MAX_CHARS left out observations `memq context` would show."""
    chosen = await choose_context(store, project, freshness=freshness)
    capped = max_chars < context_chars
    result = fit_context(project, chosen, max_chars - _CUT_ROOM if capped else context_chars)
    note = ""
    if capped:
        whole = fit_context(project, chosen, context_chars)
        left_out = len(whole.observations) - len(result.observations)
        if left_out > 0:
            note = (
                f"[memq cut this answer to MEMQ_MCP_MAX_CHARS={max_chars} characters: it left"
                f" out {counted(left_out, ('observation', 'observations'))}; search for them]\n"
            )
    if not result.markdown:
        shown = as_data(project, PROJECT_SHOWN_CHARS)
        return f"memq has nothing stored for project {shown!r} yet.\n"
    return result.markdown + note


_CUT_ROOM = 160  # the cut note's length, kept free under the cap


def parse_ref(value: int | str) -> RowKey:
    """(kind, id) of an observation id (12, "12") or a summary ref ("summary:12")."""
    key = row_key(str(value).strip())
    if key is None:
        raise ToolInputError(f"{as_data(str(value), 40)!r} is not an id: use 12 or summary:12")
    return key


def _hit_row(h: SearchHit) -> str:
    title = h.title or "(untitled)"
    if h.subtitle:
        title += f" — {h.subtitle}"
    if h.stale_files:
        title += f" {changed_note(h.stale_files)}"
    # A vector match's snippet is often the title itself: not worth its tokens twice.
    snippet = "" if h.snippet in (h.title, title) else h.snippet
    cells = (
        ref((h.kind, h.id)), h.kind, h.type or "", cell(title, 160), cell(h.project),
        cell(h.memory_session_id), _when(h.created_at), cell(snippet, 160),
    )  # fmt: skip
    return "| " + " | ".join(cells) + " |\n"


def _full_row(row: StoredRow) -> str:
    kind = row.type if row.kind == "observation" else "summary"
    lines = [
        f"### {ref((row.kind, row.id))} · {kind} · project {as_data(row.project)}"
        f" · session {as_data(row.memory_session_id)} · {_when(row.created_at)}\n"
    ]
    for field, value in msgspec.structs.asdict(row).items():
        if field in _HEADING_FIELDS or value is None or value == []:
            continue
        shown = "; ".join(map(as_data, value)) if isinstance(value, list) else as_data(str(value))
        lines.append(f"- {field}: {shown}\n")
    return "".join(lines) + "\n"


def _timeline_line(e: TimelineEntry, marked: bool) -> str:
    start = f"{'→' if marked else '-'} {_when(e.created_at)}"
    if e.kind == "prompt":
        return f"{start} prompt #{e.prompt_number}: {as_data(e.prompt_text or '', PROMPT_CHARS)}\n"
    row = e.row
    if row is None:
        return f"{start} {e.kind} {e.id}\n"
    if row.kind == "summary":
        text = row.request or row.completed or row.learned or ""
        return f"{start} summary:{row.id}: {as_data(text, PROMPT_CHARS)}\n"
    title = as_data(row.title or "(untitled)", 160)
    subtitle = f" — {as_data(row.subtitle, 160)}" if row.subtitle else ""
    changed = f" {as_data(changed_note(row.stale_files))}" if row.stale_files else ""
    return f"{start} {row.id} {row.type}: {title}{subtitle}{changed}\n"


def _when(iso: str) -> str:
    return iso[:19].replace("T", " ")


def _never(shown: int, shortened: bool) -> str:
    return ""
