"""One agent hook input made ready to publish: what the command and HTTP hooks share."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import NamedTuple

from pipeline.events import Event
from worker.ingest.agents.registry import reader_for
from worker.ingest.file_hashes import with_file_hashes
from worker.ingest.prepare import PreparedEvent
from worker.ingest.producer import prepare_event
from worker.project import resolve_project
from worker.settings import Settings


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
    hook = reader_for(agent)(
        raw,
        project_of=lambda cwd: resolve_project(cwd or default_cwd, settings.project),
        host=socket.gethostname(),
        now=datetime.now(UTC),
    )
    events = prepare_all(hook.events, settings)
    return HookInput(hook.session_start, hook.cwd, hook.project, events, hook.resend)


def prepare_all(events: Iterable[Event], settings: Settings) -> list[PreparedEvent]:
    """Each event with its files' hashes, scrubbed and capped for the wire."""
    # The hashes of the files each call touched, as they are now: later readers mark a memory
    # whose files changed since.
    return [prepare_event(with_file_hashes(e), settings) for e in events]
