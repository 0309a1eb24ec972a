"""One agent hook input made ready to publish: what the command and HTTP hooks share."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

from pipeline.events import Event
from worker.ingest.agents.payload import HookPayloadError
from worker.ingest.agents.registry import reader_for
from worker.ingest.file_hashes import with_file_hashes
from worker.ingest.prepare import PreparedEvent
from worker.ingest.producer import prepare_event
from worker.project import resolve_project
from worker.settings import Settings

# JSON nested deeper than this is refused: redaction and the wire encoding walk it
# recursively, and a real tool's input or output is a few levels deep.
MAX_NESTING = 100
_TOO_DEEP = f"hook input nested more than {MAX_NESTING} levels deep (memq's limit): not published"


class HookInput(NamedTuple):
    """A decoded hook input: its context request, project, prepared events and re-sends."""

    session_start: bool
    cwd: str
    project: str
    events: list[PreparedEvent]
    resend: list[Event]
    """Calls their own hooks may have published already: `prepare_all` them once it is known
    which are new (the command hook asks Redis), or all of them (the publish keeps one)."""


def read_hook_input(raw: bytes, settings: Settings, *, agent: str, default_cwd: str) -> HookInput:
    """Decode, map and prepare one hook input; HookPayloadError or PipelineError when unusable."""
    try:
        hook = reader_for(agent)(
            raw,
            project_of=lambda cwd: resolve_project(cwd or default_cwd, settings.project),
            host=socket.gethostname(),
            now=datetime.now(UTC),
        )
    except RecursionError as e:  # msgspec's decoder, some thousand levels down
        raise HookPayloadError(_TOO_DEEP) from e
    if any(_is_too_deep(e) for e in hook.events):
        raise HookPayloadError(_TOO_DEEP)
    events = prepare_all(hook.events, settings)
    resend = [e for e in hook.resend if not _is_too_deep(e)]  # read back from a transcript
    return HookInput(hook.session_start, hook.cwd, hook.project, events, resend)


def prepare_all(events: Iterable[Event], settings: Settings) -> list[PreparedEvent]:
    """Each event with its files' hashes, scrubbed and capped for the wire."""
    # The hashes of the files each call touched, as they are now: later readers mark a memory
    # whose files changed since.
    return [prepare_event(with_file_hashes(e), settings) for e in events]


def _is_too_deep(event: Event) -> bool:
    """Whether a field of the event nests lists and objects past MAX_NESTING (no recursion)."""
    stack: list[tuple[object, int]] = [(getattr(event, f), 0) for f in event.__struct_fields__]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Iterable[object] = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth >= MAX_NESTING:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
