"""One agent hook input made ready to publish: what the command and HTTP hooks share."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

from worker.ingest.agents.registry import AgentHook, reader_for
from worker.ingest.file_hashes import with_file_hashes
from worker.ingest.producer import prepare_event
from worker.project import resolve_project
from worker.settings import Settings


def read_hook_input(raw: bytes, settings: Settings, *, agent: str, default_cwd: str) -> AgentHook:
    """Decode, map and prepare one hook input; HookPayloadError or PipelineError when unusable."""
    hook = reader_for(agent)(
        raw,
        project_of=lambda cwd: resolve_project(cwd or default_cwd, settings.project),
        host=socket.gethostname(),
        now=datetime.now(UTC),
    )
    # The hashes of the files each call touched, as they are now: later readers mark a memory
    # whose files changed since.
    prepared = [prepare_event(with_file_hashes(e), settings) for e in hook.events]
    return hook._replace(events=prepared)
