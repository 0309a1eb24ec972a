"""What a list shows: the filters, the one test of a row against them, the rows they select."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

import msgspec

from pipeline.events import Identifier
from worker.errors import WorkerError
from worker.search.hybrid import BadQueryError, match_expression
from worker.storage.index_records import TextFilter
from worker.storage.protocol import Store
from worker.storage.records import StoredRow


class BadFilterError(WorkerError):
    """A request's filter or path holds what no stored row can (a NUL character)."""


def no_nul(value: str, what: str) -> str:
    """`value` unchanged; BadFilterError when it holds a NUL (PostgreSQL and FTS5 cannot)."""
    if "\x00" in value:
        raise BadFilterError(f"the {what} contains a NUL character: remove it")
    return value


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """What the list shows: a search query and project, session and type filters."""

    q: str = ""
    project: str = ""
    session: str = ""
    type: str = ""


def read_filters(params: Mapping[str, str]) -> Filters:
    """The filters of a query string (blank values filter nothing); BadFilterError on a NUL."""
    return Filters(
        q=no_nul(params.get("q", ""), "search").strip(),
        project=no_nul(params.get("project", ""), "project").strip(),
        session=no_nul(params.get("session", ""), "session").strip(),
        type=no_nul(params.get("type", ""), "type").strip(),
    )


def matches(row: StoredRow, filters: Filters) -> bool:
    """True when `row` passes the project, session and type filters (the query aside)."""
    kind = row.type if row.kind == "observation" else "summary"
    return (
        (not filters.session or row.memory_session_id == filters.session)
        and (not filters.project or row.project == filters.project)
        and (not filters.type or kind == filters.type)
    )


def is_session_id(value: str) -> bool:
    """True when `value` is a session id as events carry them (so a filter can match)."""
    try:
        msgspec.convert(value, Identifier)
    except msgspec.ValidationError:
        return False
    return True


def events_url(filters: Filters) -> str | None:
    """The live feed of a list with `filters`, filtered by the server; None when none can match.

    A session id no event could carry matches no live row, so that list follows nothing.
    """
    if filters.session and not is_session_id(filters.session):
        return None
    wanted = {"project": filters.project, "session": filters.session, "type": filters.type}
    query = urlencode({k: v for k, v in wanted.items() if v})
    return f"/events?{query}" if query else "/events"


async def find_rows(store: Store, filters: Filters, limit: int) -> list[StoredRow]:
    """Rows for the list: keyword search (FTS5) when `q` is set, else the newest; filtered."""
    if filters.q:
        try:
            match = match_expression(filters.q)
        except BadQueryError:
            return []
        text_filter = TextFilter(project=filters.project or None, type=filters.type or None)
        # A session filter is applied afterwards: search over a wider window for it.
        window = limit * 5 if filters.session else limit
        hits = await store.search_text(match, text_filter, window)
        rows = await store.rows_by_keys([(h.kind, h.id) for h in hits])
    else:
        rows = await store.observations(
            memory_session_id=filters.session or None,
            project=filters.project or None,
            limit=limit * 5 if filters.type else limit,
        )
    return [r for r in rows if matches(r, filters)][:limit]
