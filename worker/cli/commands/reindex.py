"""`memq reindex` and `memq import-claude-mem`: rebuild the vector index, import old memories."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from worker.cli.exits import BadInputError, settings_from_environment
from worker.errors import WorkerError
from worker.settings import Settings

if TYPE_CHECKING:
    from rich.progress import Progress

    from worker.storage.protocol import IndexStore

WATCH_POLL_S = 0.5


def register(app: typer.Typer) -> None:
    """Add `memq reindex` and `memq import-claude-mem`."""
    app.command("reindex")(reindex)
    app.command("import-claude-mem")(import_claude_mem_command)


def _progress() -> Progress:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    # Off a terminal (CI logs, pipes) a bar is noise: the final line says what happened.
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        disable=not console.is_terminal,
    )


def reindex(
    project: Annotated[str | None, typer.Option("--project", help="Only this project.")] = None,
) -> None:
    """Rebuild the vector index from storage; resumable (run it again) and idempotent."""
    from worker.search.vector_index import chroma_target
    from worker.storage.factory import open_store

    async def run(settings: Settings) -> str:
        target = chroma_target(settings)
        if target is None:
            raise BadInputError("MEMQ_CHROMA=off: there is no vector index to rebuild")
        store = open_store(settings)
        try:
            return await _reindex(settings, store, project)
        finally:
            await store.aclose()

    message = asyncio.run(run(settings_from_environment()))
    print(message)


async def _reindex(settings: Settings, store: IndexStore, project: str | None) -> str:
    from worker.search.sync_lock import sync_lock
    from worker.search.vector_index import chroma_target
    from worker.search.vector_sync import SyncPolicy, VectorSync, index_opener

    target = chroma_target(settings)
    assert target is not None
    start = await store.start_reindex(project)
    what = f"project {project}" if project else "every project"
    lock = sync_lock(target)
    with _progress() as bar:
        verb = "resuming" if start.resumed else "indexing"
        task = bar.add_task(f"{verb} {what}", total=start.pending)
        if lock is not None and not lock.acquire():
            # A worker on this machine owns the embedded index: it drains what was queued.
            bar.update(task, description=f"a running worker is {verb} {what}")
            while (lag := await store.vector_lag(project)) > 0:
                bar.update(task, completed=start.pending - lag)
                await asyncio.sleep(WATCH_POLL_S)
        else:
            try:
                sync = VectorSync(
                    store, index_opener(settings, target), policy=SyncPolicy(batch_rows=128)
                )
                while (lag := await store.vector_lag(project)) > 0:
                    result = await sync.drain_once()
                    if result.failed:
                        raise WorkerError(
                            f"{target.describe()} failed ({result.error}); {lag} rows wait:"
                            " run `memq reindex` again to resume"
                        )
                    bar.update(task, completed=start.pending - await store.vector_lag(project))
                    if result.idle:
                        await asyncio.sleep(WATCH_POLL_S)  # rows claimed by another worker
            finally:
                if lock is not None:
                    lock.release()
        bar.update(task, completed=start.pending)
    await store.finish_reindex(project)
    return f"indexed {start.pending} rows of {what} into {target.describe()}"


def import_claude_mem_command(
    path: Annotated[
        Path, typer.Argument(help="The claude-mem database, e.g. ~/.claude-mem/claude-mem.db")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Import a claude-mem database (sessions, observations, summaries, prompts); re-runnable."""
    from worker.ops.import_claude_mem import UnknownDatabaseError, import_claude_mem
    from worker.storage.factory import open_store

    async def run(settings: Settings) -> object:
        store = open_store(settings)
        try:
            with _progress() as bar:
                task = bar.add_task("importing sessions", total=None)

                def advance(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                return await import_claude_mem(store, path.expanduser(), progress=advance)
        except UnknownDatabaseError as e:
            raise BadInputError(str(e)) from e
        finally:
            await store.aclose()

    counts = asyncio.run(run(settings_from_environment()))
    if as_json:
        print(msgspec.json.encode(counts).decode())
        return
    data = msgspec.to_builtins(counts)
    print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in data.items()))
