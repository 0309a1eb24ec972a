"""`memq publish`: events as JSON lines on stdin, one per line, published in order."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, BinaryIO

import msgspec
import typer

from pipeline.errors import EventDecodeError
from pipeline.events import Event, decode_event
from worker.cli.exits import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_RUNTIME,
    settings_from_environment,
)
from worker.settings import Settings

if TYPE_CHECKING:
    from worker.ingest.prepare import PreparedEvent

BATCH = 500
_LISTED_LINES = 10


def register(app: typer.Typer) -> None:
    """Add `memq publish` to the memq app."""
    app.command("publish")(publish_command)


def publish_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per event.")
    ] = False,
) -> None:
    """Publish JSON-lines events from stdin; prints `event_id stream_id` (or `duplicate`).

    A line without `project` gets MEMQ_PROJECT or the git repository of the current
    directory. Malformed lines are reported (exit 2) and the valid ones still published.
    """
    settings = settings_from_environment()
    code = asyncio.run(publish_lines(sys.stdin.buffer, settings, as_json=as_json))
    if code != EXIT_OK:
        raise typer.Exit(code)


class _Tally(msgspec.Struct, kw_only=True):
    published: int = 0
    duplicates: int = 0
    rejected: list[int] = msgspec.field(default_factory=list)


async def publish_lines(stdin: BinaryIO, settings: Settings, *, as_json: bool) -> int:
    """Publish every valid line; returns the exit code (1 on backpressure, 2 on a bad line)."""
    from worker.ingest.producer import Producer, PublishRefusedError, PublishResult, prepare_event

    tally = _Tally()
    project = _default_project(settings)

    def report(results: Iterable[PublishResult]) -> None:
        for r in results:
            if r.status == "refused":
                continue
            tally.published += r.status == "added"
            tally.duplicates += r.status == "duplicate"
            if as_json:
                sys.stdout.write(msgspec.json.encode(r).decode() + "\n")
            else:
                shown = r.stream_id if r.status == "added" else "duplicate"
                sys.stdout.write(f"{r.event_id} {shown}\n")
        sys.stdout.flush()

    async with await Producer.connect(settings) as producer:

        async def send(batch: list[PreparedEvent]) -> str | None:
            try:
                report(await producer.publish_many(batch))
            except PublishRefusedError as e:
                report(e.results)
                return str(e)
            return None

        batch: list[PreparedEvent] = []
        for line_no, line in enumerate(stdin, start=1):
            if not line.strip():
                continue
            try:
                batch.append(prepare_event(_decode_line(line, project), settings))
            except EventDecodeError as e:
                tally.rejected.append(line_no)
                print(f"memq: line {line_no}: {e}", file=sys.stderr)
            if len(batch) >= BATCH:
                refused = await send(batch)
                batch = []
                if refused is not None:
                    return _finish(tally, refused=refused)
        return _finish(tally, refused=await send(batch) if batch else None)


def _finish(tally: _Tally, *, refused: str | None) -> int:
    if refused is not None:
        print(f"memq: {refused}", file=sys.stderr)
    lines = ", ".join(str(n) for n in tally.rejected[:_LISTED_LINES])
    if len(tally.rejected) > _LISTED_LINES:
        lines += ", …"
    rejected = f"{len(tally.rejected)} rejected" + (f" (lines {lines})" if lines else "")
    after = "; the valid lines were published" if tally.rejected else ""
    stopped = "; stopped at the refused event" if refused is not None else ""
    print(
        f"memq: {tally.published} published, {tally.duplicates} duplicates, {rejected}"
        f"{after}{stopped}",
        file=sys.stderr,
    )
    if refused is not None:
        return EXIT_RUNTIME
    return EXIT_BAD_INPUT if tally.rejected else EXIT_OK


def _decode_line(line: bytes, project: Callable[[], str]) -> Event:
    try:
        return decode_event(line)
    except EventDecodeError:
        try:
            obj = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError):  # untyped decoding has no depth limit
            obj = None
        if not isinstance(obj, dict) or "project" in obj:
            raise
        obj["project"] = project()
        return decode_event(msgspec.json.encode(obj))


def _default_project(settings: Settings) -> Callable[[], str]:
    resolved: list[str] = []

    def project() -> str:
        if not resolved:
            from worker.project import resolve_project

            resolved.append(resolve_project(os.getcwd(), settings.project))
        return resolved[0]

    return project
