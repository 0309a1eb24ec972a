"""Which evidence files of stored observations changed since: compared on the agent host.

A stored key is relative to the checkout's root (or absolute, outside it), so another
checkout of the project compares its own files. Each file is hashed at most once per call,
and hashing stops after a time budget: what is left unchecked counts as unchanged (unknown).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from msgspec.structs import replace

from pipeline.turns.evidence import normalise_path, same_file
from worker.file_digest import file_sha256
from worker.project import checkout_root, resolve_project
from worker.storage.index_records import TimelineEntry
from worker.storage.records import StoredRow

BUDGET_S = 0.15
_GONE = "gone"  # never a SHA-256 hex


class Freshness:
    """Compares stored hashes with the files under `root`, each file read once.

    Only the rows of `project` (the checkout's own, when known) are compared: another
    project's files are not here, and a file that is not here would read as deleted.
    """

    def __init__(
        self, root: Path, *, project: str | None = None, budget_s: float = BUDGET_S
    ) -> None:
        self.root = root
        self.project = project
        self._budget_s = budget_s
        self._deadline: float | None = None
        self._current: dict[str, str | None] = {}

    @classmethod
    def here(
        cls, cwd: str | None = None, *, project: str | None = None, budget_s: float = BUDGET_S
    ) -> Freshness:
        """For the checkout holding `cwd` (default: the process's directory), else `cwd` itself;
        `project` is MEMQ_PROJECT when set (else the checkout's own name)."""
        start = Path(os.path.abspath(cwd or os.getcwd()))
        return cls(
            checkout_root(start) or start,
            project=resolve_project(start, project),
            budget_s=budget_s,
        )

    def stale_files(self, row: StoredRow) -> list[str]:
        """The row's evidence paths whose content no longer has the stored hash ([] if unknown)."""
        if row.kind != "observation" or (self.project is not None and row.project != self.project):
            return []
        files = [*(row.files_read or ()), *(row.files_modified or ())]
        stale: list[str] = []
        for key, stored in (row.file_hashes or {}).items():
            if stored is None:
                continue
            current = self._hash(key)
            if current is not None and current != stored:
                path = _evidence_path(key, files)
                if path not in stale:
                    stale.append(path)
        return stale

    def mark(self, rows: Iterable[StoredRow]) -> list[StoredRow]:
        """The rows with `stale_files` set on observations."""
        return [
            replace(r, stale_files=self.stale_files(r)) if r.kind == "observation" else r
            for r in rows
        ]

    def mark_timeline(self, entries: list[TimelineEntry]) -> list[TimelineEntry]:
        """The entries with `stale_files` set on their observation rows."""
        return [
            replace(e, row=replace(e.row, stale_files=self.stale_files(e.row)))
            if e.row is not None and e.row.kind == "observation"
            else e
            for e in entries
        ]

    def _hash(self, key: str) -> str | None:
        if key in self._current:
            return self._current[key]
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self._budget_s
        if now > self._deadline:
            return None  # out of time: unknown, not cached (a later call may check it)
        where = Path(key) if os.path.isabs(key) else self.root / key
        try:
            digest = file_sha256(where)
        except OSError:  # nothing there any more: a deleted file has changed
            digest = _GONE
        self._current[key] = digest
        return digest


def changed_note(stale: list[str] | None) -> str:
    """The short text mark of an observation whose files changed; "" when none did."""
    if not stale:
        return ""
    shown = ", ".join(os.path.basename(p) or p for p in stale[:3])
    more = f" +{len(stale) - 3}" if len(stale) > 3 else ""
    return f"(changed since: {shown}{more})"


def _evidence_path(key: str, files: list[str]) -> str:
    """The path as the observation lists it: `/home/me/repo/a.py` for the key `a.py`."""
    exact = [p for p in files if normalise_path(p) == key]
    return (exact or [p for p in files if same_file(p, key)] or [key])[0]
