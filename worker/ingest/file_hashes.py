"""Fingerprints of the files a tool call touched, taken on the agent host right after the call."""

from __future__ import annotations

import os
import time
from pathlib import Path

from msgspec.structs import replace

from pipeline.events import Event, ToolCall
from pipeline.turns.evidence import file_evidence
from worker.file_digest import file_sha256, relative_key
from worker.project import checkout_root

MAX_HASHED_FILES = 64  # a call naming more files (a huge patch) records the first ones only
# The hook's whole budget is 1 s: files still unhashed after this are recorded as unknown.
HASH_BUDGET_S = 0.1


def with_file_hashes(event: Event, *, budget_s: float = HASH_BUDGET_S) -> Event:
    """The event with `file_hashes` for its evidence paths (a tool call that names files)."""
    if not isinstance(event, ToolCall) or event.file_hashes is not None:
        return event
    evidence = file_evidence([event])
    paths = list(dict.fromkeys(evidence.read + evidence.modified))[:MAX_HASHED_FILES]
    if not paths:
        return event
    cwd = os.path.abspath(event.cwd) if event.cwd else os.getcwd()
    root = checkout_root(Path(cwd))
    hashes: dict[str, str | None] = {}
    deadline = time.monotonic() + budget_s
    for path in paths:
        key, where = relative_key(path, cwd, root)
        if time.monotonic() > deadline:
            hashes[key] = None
            continue
        try:
            hashes[key] = file_sha256(where)
        except OSError:  # gone right after the call (a deleting patch): nothing to compare
            hashes[key] = None
    return replace(event, file_hashes=hashes)
