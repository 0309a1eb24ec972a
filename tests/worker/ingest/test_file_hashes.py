"""The producer's file fingerprints: which files a tool call touched, and their content after it."""

from __future__ import annotations

import hashlib
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import EventDecodeError
from pipeline.events import Prompt, ToolCall, decode_event, encode_event
from worker.file_digest import MAX_HASHED_BYTES, file_sha256
from worker.ingest.file_hashes import with_file_hashes

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _call(cwd: Path | str, tool: str, tool_input: Any) -> ToolCall:
    return ToolCall(
        event_id="e1", memory_session_id="s1", project="p", occurred_at=NOW,
        tool_name=tool, tool_input=tool_input, cwd=str(cwd),
    )  # fmt: skip


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(name="repo")
def _fix_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_bytes(b"a = 1\n")
    return repo


def test_paths_are_keyed_from_the_checkout_root_whatever_the_cwd(repo: Path) -> None:
    absolute = with_file_hashes(_call(repo, "Read", {"file_path": str(repo / "src" / "a.py")}))
    relative = with_file_hashes(_call(repo / "src", "Edit", {"file_path": "a.py"}))
    assert isinstance(absolute, ToolCall)
    assert isinstance(relative, ToolCall)
    assert absolute.file_hashes == relative.file_hashes == {"src/a.py": _sha(b"a = 1\n")}


def test_a_patch_names_every_file_and_unknowns_are_null(repo: Path, tmp_path: Path) -> None:
    (repo / "big.bin").write_bytes(b"x" * (MAX_HASHED_BYTES + 1))
    (repo / "dir").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"o")
    patch = "".join(
        f"*** Update File: {p}\n" for p in ("src/a.py", "big.bin", "dir", "gone.py", str(outside))
    )
    call = with_file_hashes(_call(repo, "apply_patch", {"patch": patch}))
    assert isinstance(call, ToolCall)
    assert call.file_hashes == {
        "src/a.py": _sha(b"a = 1\n"),
        "big.bin": None,  # over 2 MB
        "dir": None,  # unreadable as a file
        "gone.py": None,  # deleted by the call: nothing to compare later
        outside.as_posix(): _sha(b"o"),  # outside the checkout: absolute
    }


def test_files_left_when_the_time_budget_is_spent_are_unknown(repo: Path) -> None:
    call = with_file_hashes(_call(repo, "Read", {"file_path": "src/a.py"}), budget_s=-1.0)
    assert isinstance(call, ToolCall)
    assert call.file_hashes == {"src/a.py": None}


def test_calls_without_file_evidence_and_other_events_are_unchanged(repo: Path) -> None:
    bash = _call(repo, "Bash", {"command": "cat src/a.py"})
    prompt = Prompt(event_id="p1", memory_session_id="s1", project="p", occurred_at=NOW,
                    prompt_text="hi")  # fmt: skip
    assert with_file_hashes(bash) is bash
    assert with_file_hashes(prompt) is prompt
    assert b"file_hashes" not in encode_event(bash)  # older consumers see the same bytes


def test_file_hashes_round_trip_and_bad_values_are_refused(repo: Path) -> None:
    call = with_file_hashes(_call(repo, "Read", {"file_path": "src/a.py"}))
    assert decode_event(encode_event(call)) == call
    raw = encode_event(call).replace(_sha(b"a = 1\n").encode(), b"not-a-hash")
    with pytest.raises(EventDecodeError, match="file_hashes"):
        decode_event(raw)


def test_only_regular_files_are_opened_so_a_fifo_or_device_is_unknown_at_once(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)  # open() for reading would wait for a writer forever
    started = time.monotonic()
    assert file_sha256(fifo) is None
    assert file_sha256("/dev/zero") is None  # a read that never ends
    assert file_sha256(tmp_path) is None
    assert time.monotonic() - started < 0.05
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "gone")


def test_a_file_still_being_read_at_the_deadline_is_unknown(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * MAX_HASHED_BYTES)  # eight blocks: the deadline is checked after one
    assert file_sha256(big, deadline=time.monotonic() - 1) is None
    assert file_sha256(big) == _sha(b"x" * MAX_HASHED_BYTES)  # at the cap: still hashed


def test_a_read_of_a_fifo_in_a_tool_call_is_recorded_unhashed_beside_the_others(
    repo: Path,
) -> None:
    os.mkfifo(repo / "pipe")
    patch = "".join(f"*** Update File: {p}\n" for p in ("pipe", "src/a.py"))
    started = time.monotonic()
    call = with_file_hashes(_call(repo, "apply_patch", {"patch": patch}))
    assert time.monotonic() - started < 0.1
    assert isinstance(call, ToolCall)
    assert call.file_hashes == {"pipe": None, "src/a.py": _sha(b"a = 1\n")}
