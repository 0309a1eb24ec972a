"""Which stored evidence files changed since, compared with the files of this checkout."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from worker.search.freshness import Freshness, changed_note
from worker.storage.records import StoredRow


def _row(hashes: dict[str, str | None], files: list[str], kind: str = "observation") -> StoredRow:
    return StoredRow(
        kind="observation" if kind == "observation" else "summary", id=1,
        memory_session_id="s1", project="p", created_at="2026-12-01T00:00:00.000Z",
        files_read=files, files_modified=[], file_hashes=hashes,
    )  # fmt: skip


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_changed_and_deleted_files_are_stale_unknown_and_unchanged_ones_are_not(
    tmp_path: Path,
) -> None:
    for name, text in (("same.py", "s"), ("edited.py", "new"), ("big.bin", "b")):
        (tmp_path / name).write_text(text)
    hashes = {"same.py": _sha("s"), "edited.py": _sha("old"), "big.bin": None,
              "gone.py": _sha("g")}  # fmt: skip
    files = ["/old/checkout/same.py", "/old/checkout/edited.py", "big.bin", "./gone.py"]
    row = _row(hashes, files)
    assert Freshness(tmp_path).stale_files(row) == ["/old/checkout/edited.py", "./gone.py"]
    assert Freshness(tmp_path).mark([row])[0].stale_files == [
        "/old/checkout/edited.py",
        "./gone.py",
    ]
    assert Freshness(tmp_path).stale_files(_row(hashes, files, kind="summary")) == []


def test_each_file_is_read_once_per_call(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a")
    check = Freshness(tmp_path)
    assert check.stale_files(_row({"a.py": _sha("a")}, ["a.py"])) == []
    (tmp_path / "a.py").write_text("changed")  # within one call the first answer holds
    assert check.stale_files(_row({"a.py": _sha("a")}, ["a.py"])) == []
    assert Freshness(tmp_path).stale_files(_row({"a.py": _sha("a")}, ["a.py"])) == ["a.py"]


def test_out_of_time_the_rest_counts_as_unknown(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("changed")
    check = Freshness(tmp_path, budget_s=-1.0)  # the budget is already spent
    assert check.stale_files(_row({"a.py": _sha("a")}, ["a.py"])) == []


def test_the_text_mark_names_a_few_files() -> None:
    assert changed_note([]) == ""
    assert changed_note(["src/a.py"]) == "(changed since: a.py)"
    assert changed_note(["a", "b", "c", "d", "e"]) == "(changed since: a, b, c +2)"


def test_another_projects_rows_are_never_called_stale(tmp_path: Path) -> None:
    # Read from repo A, a row of repo B names files that are not here: unknown, not deleted.
    (tmp_path / ".git").mkdir()
    row = StoredRow(kind="observation", id=1, memory_session_id="s", project="elsewhere",
                    created_at="2026-12-01T00:00:00Z", files_read=["a.py"],
                    file_hashes={"a.py": "0" * 64})  # fmt: skip
    here = Freshness.here(str(tmp_path))
    assert here.stale_files(row) == []
    mine = msgspec.structs.replace(row, project=here.project)
    assert here.stale_files(mine) == ["a.py"]  # a.py is not here: deleted, so changed
