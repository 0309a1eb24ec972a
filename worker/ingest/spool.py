"""The on-disk spool: events a hook could not publish wait here, in order, until a flush.

Files in `<data_dir>/spool/`: `events.jsonl` (appended, fsynced, one prepared event per
line), `events.flushing.jsonl` (the batch a flush is publishing: renamed from the former, so
appends never wait for Redis), `events.jsonl.rejected` (corrupt lines, kept for a human) and
`dropped` (how many events a full spool refused). `append.lock` serialises appends with the
rename; `flush.lock` lets one process flush at a time. A flush publishes in order and event
ids make a re-publish after a crash harmless, so every spooled event lands exactly once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, Protocol

import msgspec

from pipeline.errors import EventDecodeError
from pipeline.events import Event, decode_event
from worker.ingest.prepare import PreparedEvent
from worker.ingest.producer import PublishRefusedError, PublishResult
from worker.ingest.spool_io import count_lines, fsync_dir, size, try_lock
from worker.settings import Settings

FLUSH_CHUNK = 200
# The spool file's cap: days of tool calls while Redis is unreachable. Past it an event is
# dropped and counted, so a long outage cannot fill the disk.
SPOOL_MAX_BYTES = 64 * 1024 * 1024


class Publisher(Protocol):
    """What a flush publishes through (SyncProducer)."""

    def publish_many(self, events: Sequence[PreparedEvent]) -> list[PublishResult]: ...


class FlushResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one flush did; `remaining` events stay spooled for the next one."""

    published: int = 0
    duplicates: int = 0
    rejected: int = 0
    remaining: int = 0
    refused: str | None = None
    """The backpressure reason when a session refused an event (the flush stopped there)."""
    stopped: bool = False
    """Stopped early (backpressure or the deadline): events remain spooled."""


class SpoolStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What `memq spool status` reports."""

    path: str
    events: int
    bytes: int
    max_bytes: int
    dropped: int
    rejected: int


class Spool:
    """The spool directory of one data dir."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.path = directory / "events.jsonl"
        self.flushing_path = directory / "events.flushing.jsonl"
        self.rejected_path = directory / "events.jsonl.rejected"
        self.dropped_path = directory / "dropped"

    @classmethod
    def from_settings(cls, settings: Settings) -> Spool:
        """The spool under the configured data dir."""
        return cls(settings.data_path / "spool", SPOOL_MAX_BYTES)

    def pending(self) -> bool:
        """Whether any event waits in the spool (cheap: two stat calls)."""
        return size(self.path) > 0 or size(self.flushing_path) > 0

    def append(self, events: Sequence[PreparedEvent]) -> int:
        """Append events durably; returns how many fit (the others are dropped and counted)."""
        with self._append_lock():
            return self._append_locked(events)

    def try_append(self, events: Sequence[PreparedEvent]) -> bool:
        """Append unless another thread or process holds the append lock (never waits)."""
        try:
            with self._append_lock(blocking=False):
                self._append_locked(events)
        except BlockingIOError:
            return False
        return True

    def append_then_flush(
        self, events: Sequence[PreparedEvent], producer: Publisher, *, deadline: float | None = None
    ) -> FlushResult | None:
        """Queue events behind the spooled ones, then flush unless another process is flushing."""
        with self._append_lock():
            self._append_locked(events)
            # Taken while appends are locked: a flusher either sees these lines or has
            # already let go of the flush lock (it releases it before the append lock).
            flush_fd = try_lock(self.directory / "flush.lock")
        if flush_fd is None:
            return None
        return self._flush_holding(flush_fd, producer, deadline)

    def flush(self, producer: Publisher, *, deadline: float | None = None) -> FlushResult | None:
        """Publish every spooled event in order; None when another process is flushing."""
        if not self.pending():
            return FlushResult()
        self.directory.mkdir(parents=True, exist_ok=True)
        flush_fd = try_lock(self.directory / "flush.lock")
        if flush_fd is None:
            return None
        return self._flush_holding(flush_fd, producer, deadline)

    def status(self) -> SpoolStatus:
        """Counts of spooled, dropped and rejected events."""
        return SpoolStatus(
            path=str(self.path),
            events=count_lines(self.flushing_path) + count_lines(self.path),
            bytes=size(self.flushing_path) + size(self.path),
            max_bytes=self.max_bytes,
            dropped=self._dropped(),
            rejected=count_lines(self.rejected_path),
        )

    def _append_locked(self, events: Sequence[PreparedEvent]) -> int:
        used = size(self.path) + size(self.flushing_path)
        lines: list[bytes] = []
        for prepared in events:
            line = prepared.raw + b"\n"
            if used + len(line) > self.max_bytes:
                self._count_dropped(prepared.event)
                continue
            used += len(line)
            lines.append(line)
        if lines:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, b"".join(lines))
                os.fsync(fd)
            finally:
                os.close(fd)
        return len(lines)

    def _flush_holding(
        self, flush_fd: int, producer: Publisher, deadline: float | None
    ) -> FlushResult:
        total = FlushResult()
        try:
            while True:
                if not self.flushing_path.exists():
                    with self._append_lock():
                        if size(self.path) == 0:
                            os.close(flush_fd)  # before the append lock: see append_then_flush
                            flush_fd = -1
                            return total
                        os.replace(self.path, self.flushing_path)
                        fsync_dir(self.directory)
                step = self._publish_file(producer, deadline)
                total = _add(total, step)
                if step.stopped:
                    remaining = count_lines(self.flushing_path) + count_lines(self.path)
                    return msgspec.structs.replace(total, remaining=remaining)
        finally:
            if flush_fd >= 0:
                os.close(flush_fd)

    def _publish_file(self, producer: Publisher, deadline: float | None) -> FlushResult:
        counts = {"added": 0, "duplicate": 0, "refused": 0}
        rejected = 0
        with self.flushing_path.open("rb") as f:
            for batch, batch_rejected, end in _batches(f, self._decode_or_reject):
                rejected += batch_rejected
                if not batch:
                    continue
                refused: str | None = None
                try:
                    results = producer.publish_many([event for _, event in batch])  # prepared
                except PublishRefusedError as e:
                    results, refused = e.results, str(e)
                stop = next((i for i, r in enumerate(results) if r.status == "refused"), None)
                for r in results[:stop]:
                    counts[r.status] += 1
                if stop is not None or (deadline is not None and time.monotonic() > deadline):
                    # Keep the unpublished rest, from the refused event on, for the next flush.
                    self._keep_from(batch[stop][0] if stop is not None else end)
                    return FlushResult(
                        published=counts["added"],
                        duplicates=counts["duplicate"],
                        rejected=rejected,
                        refused=refused,
                        stopped=True,
                    )
        self.flushing_path.unlink()
        fsync_dir(self.directory)
        return FlushResult(
            published=counts["added"], duplicates=counts["duplicate"], rejected=rejected
        )

    def _keep_from(self, offset: int) -> None:
        """Rewrite the flushing file as its lines from `offset` on."""
        tmp = self.flushing_path.with_suffix(".tmp")
        with self.flushing_path.open("rb") as src, tmp.open("wb") as dst:
            src.seek(offset)
            rest = src.read()
            dst.write(rest)
            dst.flush()
            os.fsync(dst.fileno())
        if rest:
            os.replace(tmp, self.flushing_path)
        else:
            tmp.unlink()
            self.flushing_path.unlink()
        fsync_dir(self.directory)

    def _decode_or_reject(self, line: bytes, line_no: int) -> PreparedEvent | None:
        # A spooled line was prepared before it was written: it is not prepared again.
        try:
            return PreparedEvent(decode_event(line), line.rstrip(b"\n"))
        except EventDecodeError as e:
            with self.rejected_path.open("ab") as f:
                f.write(line if line.endswith(b"\n") else line + b"\n")
                f.flush()
                os.fsync(f.fileno())
            _warn(f"spool line {line_no} skipped ({e}); kept in {self.rejected_path}")
            return None

    def _count_dropped(self, event: Event) -> None:
        dropped = self._dropped() + 1
        tmp = self.dropped_path.with_suffix(".tmp")
        tmp.write_text(f"{dropped}\n")
        os.replace(tmp, self.dropped_path)
        _warn(
            f"spool {self.path} is full ({self.max_bytes} bytes): event "
            f"{event.event_id} of session {event.memory_session_id} dropped ({dropped} dropped "
            "so far); start Redis and run `memq spool flush`"
        )

    def _dropped(self) -> int:
        try:
            return int(self.dropped_path.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    @contextlib.contextmanager
    def _append_lock(self, *, blocking: bool = True) -> Iterator[None]:
        # Held only for an append or a rename, never while Redis is being waited on.
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.directory / "append.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
            yield
        finally:
            os.close(fd)


def _batches(
    f: BinaryIO, decode: Callable[[bytes, int], PreparedEvent | None]
) -> Iterator[tuple[list[tuple[int, PreparedEvent]], int, int]]:
    """Yield (events with their line offsets, corrupt lines, offset after the batch)."""
    batch: list[tuple[int, PreparedEvent]] = []
    rejected = offset = 0
    for line_no, line in enumerate(f, start=1):
        event = decode(line, line_no)
        if event is None:
            rejected += 1
        else:
            batch.append((offset, event))
        offset += len(line)
        if len(batch) >= FLUSH_CHUNK:
            yield batch, rejected, offset
            batch, rejected = [], 0
    yield batch, rejected, offset


def _add(a: FlushResult, b: FlushResult) -> FlushResult:
    return FlushResult(
        published=a.published + b.published,
        duplicates=a.duplicates + b.duplicates,
        rejected=a.rejected + b.rejected,
        remaining=b.remaining,
        refused=b.refused,
        stopped=b.stopped,
    )


def _warn(message: str) -> None:
    sys.stderr.write(f"memq: {message}\n")
