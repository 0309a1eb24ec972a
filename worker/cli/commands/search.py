"""`memq search`, `memq show`, `memq timeline`, `memq context`: finding stored memories."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import msgspec
import typer

from worker.cli.exits import BadInputError, settings_from_environment
from worker.errors import WorkerError
from worker.settings import Settings

if TYPE_CHECKING:
    from worker.search.hybrid import RowKey, SearchMode, VectorSearch
    from worker.storage.protocol import Store

T = TypeVar("T")
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Project = Annotated[str | None, typer.Option("--project", help="One project.")]
FreshOnly = Annotated[
    bool,
    typer.Option("--fresh-only", help="Leave out observations whose files changed since."),
]
OPEN_INDEX_TIMEOUT_S = 15.0


class NotFoundError(WorkerError):
    """The row asked for does not exist."""


def register(app: typer.Typer) -> None:
    """Add the search commands."""
    app.command("search")(search_command)
    app.command("show")(show)
    app.command("timeline")(timeline)
    app.command("context")(context)


def search_command(
    query: Annotated[str, typer.Argument(help='Words (all must match) and "quoted phrases".')],
    project: Project = None,
    type_: Annotated[
        str | None, typer.Option("--type", help="An observation type, or `summary`.")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only rows from this date on (YYYY-MM-DD).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=200)] = 10,
    mode: Annotated[
        str, typer.Option("--mode", help="hybrid (default), fts (keywords) or vector.")
    ] = "hybrid",
    fresh_only: FreshOnly = False,
    as_json: JsonFlag = False,
) -> None:
    """Search observations and summaries by words and by meaning."""
    from worker.search.freshness import Freshness, changed_note
    from worker.search.hybrid import (
        BadQueryError,
        check_query,
        match_expression,
        ref,
        search,
        since_ms,
    )
    from worker.storage.index_records import TextFilter

    if mode not in ("hybrid", "fts", "vector"):
        raise BadInputError(f"--mode {mode}: use hybrid, fts or vector")
    try:
        filters = TextFilter(project=project, type=type_, since_ms=since_ms(since))
    except BadQueryError as e:
        raise BadInputError(f"--{e}") from e

    try:
        check_query(query)  # in every mode: the vector leg would pass a NUL on too
    except BadQueryError as e:
        raise BadInputError(str(e)) from e

    async def run(settings: Settings, store: Store) -> Any:
        if mode != "vector":
            try:
                match_expression(query)
            except BadQueryError as e:
                raise BadInputError(str(e)) from e
        vectors, reason = (None, "") if mode == "fts" else await open_vectors(settings)
        result = await search(
            store,
            query,
            filters=filters,
            limit=limit * 3 if fresh_only else limit,  # room for the stale ones dropped
            mode=cast("SearchMode", mode),
            vectors=vectors,
            vectors_off_reason=reason,
            stale_files=Freshness.here(project=settings.project).stale_files,
        )
        hits = [h for h in result.hits if not (fresh_only and h.stale_files)]
        return msgspec.structs.replace(result, hits=hits[:limit])

    result = with_store(run)
    if result.notice:
        print(f"memq: note: {result.notice}", file=sys.stderr)
    if as_json:
        print(msgspec.json.encode(result.hits).decode())
        return
    if not result.hits:
        print("no matches")
    for h in result.hits:
        shown = ref((h.kind, h.id))
        heading = h.title or "(untitled)"
        if h.subtitle:
            heading += f" — {h.subtitle}"
        if h.stale_files:
            heading += f" {changed_note(h.stale_files)}"
        print(f"{shown:>12} {h.type or '':<10} {heading}")
        print(f"{'':>12} [{h.project}] {h.memory_session_id} {h.created_at[:16]}  {h.snippet}")


async def open_vectors(settings: Settings) -> tuple[VectorSearch | None, str]:
    """The search's vector leg, or None and the reason it is missing (never raises)."""
    from worker.search.hybrid import index_search
    from worker.search.vector_index import chroma_target
    from worker.search.vector_sync import index_opener

    target = chroma_target(settings)
    if target is None:
        return None, "vector index off (MEMQ_CHROMA=off)"
    built = await asyncio.to_thread(Path(target.path or "").is_dir)
    if target.kind == "embedded" and not built:
        return None, "vector index not built yet: start a worker or run `memq reindex`"
    try:
        index = await asyncio.wait_for(
            asyncio.to_thread(index_opener(settings, target)), OPEN_INDEX_TIMEOUT_S
        )
    except Exception as e:  # any Chroma failure leaves keyword search working
        detail = " ".join(str(e).split())[:200]
        return None, f"{target.describe()} unavailable ({type(e).__name__}: {detail})"
    return index_search(index), ""


def show(
    ref: Annotated[str, typer.Argument(help="An observation id, or summary:ID.")],
    as_json: JsonFlag = False,
) -> None:
    """One stored observation or summary, every field."""
    from worker.search.freshness import Freshness

    key = _parse_ref(ref)

    async def run(settings: Settings, store: Store) -> Any:
        rows = await store.rows_by_keys([key])
        if not rows:
            raise NotFoundError(f"no {key[0]} with id {key[1]}")
        return Freshness.here(project=settings.project).mark(rows)[0]

    row = with_store(run)
    if as_json:
        print(msgspec.json.encode(row).decode())
        return
    for field, value in msgspec.structs.asdict(row).items():
        if field == "file_hashes":
            continue  # what stale_files is computed from; in --json for tools
        if value not in (None, []):
            shown = "; ".join(value) if isinstance(value, list) else value
            print(f"{field:>16}: {shown}")


def timeline(
    session: Annotated[str, typer.Option("--session", help="The memory session id.")],
    limit: Annotated[int, typer.Option("--limit", min=1)] = 1000,
    as_json: JsonFlag = False,
) -> None:
    """A session's prompts, observations and summaries in the order they happened."""

    async def run(settings: Settings, store: Store) -> Any:
        return await store.timeline(session, limit)

    entries = with_store(run)
    if as_json:
        print(msgspec.json.encode(entries).decode())
        return
    if not entries:
        print(f"no session {session}")
    for e in entries:
        when = e.created_at[:19].replace("T", " ")
        if e.kind == "prompt":
            print(f"{when} prompt #{e.prompt_number}: {' '.join((e.prompt_text or '').split())}")
        elif e.row is not None and e.kind == "observation":
            print(f"{when} {e.row.type} #{e.id}: {e.row.title or '(untitled)'}")
        elif e.row is not None:
            print(f"{when} summary #{e.id}: {e.row.request or e.row.completed or ''}")


def context(
    project: Project = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=200)] = 20,
    fresh_only: FreshOnly = False,
    as_json: JsonFlag = False,
) -> None:
    """The Markdown context a new agent session starts with (latest summary, key observations)."""
    from worker.project import resolve_project
    from worker.search.context import build_context
    from worker.search.freshness import Freshness

    async def run(settings: Settings, store: Store) -> Any:
        name = project or resolve_project(os.getcwd(), settings.project)
        return await build_context(
            store,
            name,
            limit=limit,
            budget_chars=settings.context_chars,
            freshness=Freshness.here(project=settings.project),
            stale="fresh_only" if fresh_only else "prefer",
        )

    result = with_store(run)
    if as_json:
        print(msgspec.json.encode(result).decode())
        return
    if not result.markdown:
        print(f"memq: nothing stored for project {result.project} yet", file=sys.stderr)
        return
    print(result.markdown, end="")


def with_store(run: Callable[[Settings, Store], Coroutine[Any, Any, T]]) -> T:
    """Load settings, open the store, run, close; errors become exit codes."""
    from worker.storage.factory import open_store

    async def main(settings: Settings) -> T:
        store = open_store(settings)
        try:
            return await run(settings, store)
        finally:
            await store.aclose()

    try:
        return asyncio.run(main(settings_from_environment()))
    except NotFoundError as e:
        raise BadInputError(str(e)) from e


def _parse_ref(ref: str) -> RowKey:
    from worker.search.hybrid import row_key

    key = row_key(ref)
    if key is None:
        raise BadInputError(f"{ref!r} is not an id: use 12 or summary:12")
    return key
