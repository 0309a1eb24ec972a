"""One Claude Code hook input made ready to publish: what the command and HTTP hooks share."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from pipeline.events import Event
from worker.ingest.claude_code import ClaudeCodePayload, decode_payload, events_from_payload
from worker.ingest.file_hashes import with_file_hashes
from worker.ingest.producer import prepare_event
from worker.project import resolve_project
from worker.settings import Settings

SESSION_START = "SessionStart"


class HookInput(NamedTuple):
    """A decoded hook input, its project, and its events prepared (redacted, capped)."""

    payload: ClaudeCodePayload
    project: str
    events: Sequence[Event]


def read_hook_input(raw: bytes, settings: Settings, *, default_cwd: str) -> HookInput:
    """Decode, map and prepare one hook input; HookPayloadError or PipelineError when unusable."""
    payload = decode_payload(raw)
    project = resolve_project(payload.cwd or default_cwd, settings.project)
    events = events_from_payload(
        payload, project=project, host=socket.gethostname(), now=datetime.now(UTC)
    )
    # The hashes of the files each call touched, as they are now: later readers mark a memory
    # whose files changed since.
    prepared = [prepare_event(with_file_hashes(e), settings) for e in events]
    return HookInput(payload, project, prepared)
