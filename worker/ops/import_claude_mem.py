"""`memq import-claude-mem`: copy a claude-mem SQLite database's memories into memq's store."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from pipeline.redaction.privacy import strip_private_tags
from pipeline.redaction.redact import redact_secrets
from pipeline.turns.content_hash import compute_observation_content_hash
from worker.errors import LeaseLostError, WorkerError
from worker.storage.protocol import IMPORTED_EVENT_PREFIX, WriteStore
from worker.storage.records import BatchWrite, ObservationRow, PromptRow, SummaryRow


def _columns(names: str) -> tuple[str, ...]:
    return tuple(names.split())


# What this importer reads; other columns of the original are ignored.
REQUIRED: dict[str, tuple[str, ...]] = {
    "sdk_sessions": _columns("content_session_id memory_session_id project started_at_epoch"),
    "observations": _columns(
        "id memory_session_id project type title subtitle facts narrative concepts files_read"
        " files_modified prompt_number created_at_epoch"
    ),
    "session_summaries": _columns(
        "id memory_session_id project request investigated learned completed next_steps notes"
        " prompt_number created_at_epoch"
    ),
    "user_prompts": _columns("id content_session_id prompt_number prompt_text created_at_epoch"),
}
CHUNK = 500  # records per transaction


class UnknownDatabaseError(WorkerError):
    """The file is not a claude-mem database this importer understands."""


class ImportCounts(msgspec.Struct, kw_only=True):
    """What an import did."""

    sessions: int = 0
    observations: int = 0
    duplicates: int = 0
    summaries: int = 0
    prompts: int = 0
    already_imported: int = 0


class _Session(msgspec.Struct, frozen=True):
    memq_id: str
    original_id: str | None
    content_id: str | None
    project: str


class ClaudeMemReader:
    """Read-only access to the original database (synchronous: call it from a thread)."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UnknownDatabaseError(f"{path} does not exist or is not a file")
        try:
            self._conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
            )
            self._columns = self._schema()
        except sqlite3.DatabaseError as e:
            raise UnknownDatabaseError(f"{path} is not a SQLite database ({e})") from e
        for table, columns in REQUIRED.items():
            if table not in self._columns:
                raise UnknownDatabaseError(
                    f"{path} has no table {table}: not a claude-mem database"
                )
            missing = [c for c in columns if c not in self._columns[table]]
            if missing:
                raise UnknownDatabaseError(
                    f"{path}: table {table} has no column {', '.join(missing)}"
                    " (an older claude-mem schema? run claude-mem once to migrate it)"
                )

    def _schema(self) -> dict[str, set[str]]:
        tables = [
            r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {
            t: {r[1] for r in self._conn.execute(f"PRAGMA table_info({json.dumps(t)})")}
            for t in tables
        }

    def sessions(self) -> list[_Session]:
        """Every session, oldest first; observations without a session row get their own."""
        found = self._conn.execute(
            "SELECT memory_session_id, content_session_id, project FROM sdk_sessions"
            " ORDER BY started_at_epoch, id"
        ).fetchall()
        out = [_Session(c or m, m, c, p) for m, c, p in found if c or m]
        known = {s.original_id for s in out}
        for orphan, project in self._conn.execute(
            "SELECT memory_session_id, MIN(project) FROM observations GROUP BY memory_session_id"
            " UNION SELECT memory_session_id, MIN(project) FROM session_summaries"
            " GROUP BY memory_session_id"
        ).fetchall():
            if orphan and orphan not in known:
                known.add(orphan)
                out.append(_Session(orphan, orphan, None, project))
        return out

    def rows(self, table: str, key: str, value: str | None) -> list[dict[str, Any]]:
        """One session's rows of a table, oldest first, as column -> value."""
        if value is None:
            return []
        cursor = self._conn.execute(
            f"SELECT * FROM {table} WHERE {key} = ? ORDER BY created_at_epoch, id", (value,)
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

    def close(self) -> None:
        """Close the database."""
        self._conn.close()


async def import_claude_mem(
    store: WriteStore, path: Path, *, progress: Callable[[int, int], None] | None = None
) -> ImportCounts:
    """Import every session of a claude-mem database; what is already imported is skipped."""
    reader = await asyncio.to_thread(ClaudeMemReader, path)
    counts = ImportCounts()
    try:
        sessions = await asyncio.to_thread(reader.sessions)
        for done, session in enumerate(sessions, start=1):
            await _import_session(store, reader, session, counts)
            if progress is not None:
                progress(done, len(sessions))
    finally:
        await asyncio.to_thread(reader.close)
    return counts


async def _import_session(
    store: WriteStore, reader: ClaudeMemReader, s: _Session, counts: ImportCounts
) -> None:
    observations = await asyncio.to_thread(
        reader.rows, "observations", "memory_session_id", s.original_id
    )
    summaries = await asyncio.to_thread(
        reader.rows, "session_summaries", "memory_session_id", s.original_id
    )
    prompts = await asyncio.to_thread(
        reader.rows, "user_prompts", "content_session_id", s.content_id
    )
    # The prefix keeps these ids out of the replay guard's pruning: re-runs look them up.
    tag = IMPORTED_EVENT_PREFIX
    records: list[tuple[str, datetime, Any]] = [
        *((f"{tag}observation:{r['id']}", _at(r), _observation(s, r)) for r in observations),
        *((f"{tag}summary:{r['id']}", _at(r), _summary(s, r)) for r in summaries),
        *(
            (f"{tag}prompt:{r['id']}", _at(r), _prompt(s, r, f"{tag}prompt:{r['id']}"))
            for r in prompts
            if _text(r["prompt_text"])
        ),
    ]
    seen = await store.processed_event_ids(s.memq_id, [event_id for event_id, _, _ in records])
    todo = [r for r in records if r[0] not in seen]
    counts.already_imported += len(records) - len(todo)
    if todo:
        counts.sessions += 1
    for chunk in _chunks(sorted(todo, key=lambda r: r[1]), CHUNK):
        new, duplicates = await _write(store, s, chunk)
        counts.observations += new
        counts.duplicates += duplicates
        counts.summaries += sum(isinstance(r[2], SummaryRow) for r in chunk)
        counts.prompts += sum(isinstance(r[2], PromptRow) for r in chunk)


async def _write(
    store: WriteStore, s: _Session, chunk: Sequence[tuple[str, datetime, Any]]
) -> tuple[int, int]:
    """Write one chunk; returns (new observations, deduplicated observations)."""
    try:
        result = await store.write_batch(_batch(s, chunk, await store.session_fence(s.memq_id)))
    except LeaseLostError:
        # A worker advanced the session's fence meanwhile: write at the new one.
        result = await store.write_batch(_batch(s, chunk, await store.session_fence(s.memq_id)))
    return sum(r.kind == "observation" for r in result.stored), result.deduplicated


def _batch(
    s: _Session, chunk: Sequence[tuple[str, datetime, Any]], fence: int | None
) -> BatchWrite:
    # The session's current fence: an import never takes a live worker's lease away.
    return BatchWrite(
        memory_session_id=s.memq_id,
        project=s.project,
        fence=fence or 0,
        event_ids=[event_id for event_id, _, _ in chunk],
        observations=[r for _, _, r in chunk if isinstance(r, ObservationRow)],
        summaries=[r for _, _, r in chunk if isinstance(r, SummaryRow)],
        prompts=[r for _, _, r in chunk if isinstance(r, PromptRow)],
        occurred_at=max(at for _, at, _ in chunk),
    )


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _at(row: dict[str, Any]) -> datetime:
    epoch = int(row.get("created_at_epoch") or 0)
    # The original writes milliseconds; a few very old rows hold seconds.
    return datetime.fromtimestamp(epoch / 1000 if epoch > 10**11 else epoch, UTC)


def _list(value: object) -> list[str]:
    """A JSON array column (the original stores JSON text); plain text becomes one item."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return [value]
        value = decoded
    items = value if isinstance(value, list) else [value]
    return [text for v in items if (text := _text(v)) is not None]


def _text(value: object) -> str | None:
    """The value as the producer would have sent it: private regions gone, secrets redacted."""
    if value is None:
        return None
    text = redact_secrets(strip_private_tags(str(value)))
    return text if text.strip() else None


def _observation(s: _Session, r: dict[str, Any]) -> ObservationRow:
    title, narrative = _text(r["title"]), _text(r["narrative"]) or _text(r.get("text"))
    facts = _list(r["facts"])
    return ObservationRow(
        memory_session_id=s.memq_id,
        project=r["project"] or s.project,
        type=r["type"] or "discovery",
        title=title,
        subtitle=_text(r["subtitle"]),
        facts=facts,
        narrative=narrative,
        concepts=_list(r["concepts"]),
        files_read=_list(r["files_read"]),
        files_modified=_list(r["files_modified"]),
        prompt_number=r["prompt_number"] or None,
        content_hash=compute_observation_content_hash(s.memq_id, title, narrative, facts),
        created_at=_at(r),
        model=_text(r.get("generated_by_model")),
    )


def _summary(s: _Session, r: dict[str, Any]) -> SummaryRow:
    return SummaryRow(
        memory_session_id=s.memq_id,
        project=r["project"] or s.project,
        request=_text(r["request"]),
        investigated=_text(r["investigated"]),
        learned=_text(r["learned"]),
        completed=_text(r["completed"]),
        next_steps=_text(r["next_steps"]),
        notes=_text(r["notes"]),
        prompt_number=r["prompt_number"] or None,
        created_at=_at(r),
    )


def _prompt(s: _Session, r: dict[str, Any], event_id: str) -> PromptRow:
    return PromptRow(
        memory_session_id=s.memq_id,
        project=s.project,
        prompt_number=int(r["prompt_number"] or 0),
        prompt_text=_text(r["prompt_text"]) or "",
        created_at=_at(r),
        event_id=event_id,
    )
