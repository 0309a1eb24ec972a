"""File evidence: read/modified paths from tool inputs, patch headers, the model-path merge rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline import (
    FileEvidence,
    ParsedObservation,
    ToolCall,
    file_evidence,
    mentioned_paths,
    merge_model_files,
    normalise_path,
    patch_paths,
)
from pipeline.records import ObservationRow
from pipeline.turns.evidence import ObservationFiles, observation_files, same_file
from pipeline.turns.turn_records import observation_rows


def call(
    tool_name: str, tool_input: object, file_hashes: dict[str, str | None] | None = None
) -> ToolCall:
    return ToolCall(
        event_id="e1",
        memory_session_id="s1",
        project="p",
        occurred_at=datetime(2025, 1, 1, tzinfo=UTC),
        tool_name=tool_name,
        tool_input=tool_input,
        file_hashes=file_hashes,
    )


@pytest.mark.parametrize(
    ("tool_input", "read"),
    [
        ({"file_path": "/repo/a.py"}, ["/repo/a.py"]),
        ({"filePath": "b.py"}, ["b.py"]),
        ({"notebook_path": "n.ipynb"}, ["n.ipynb"]),
        ({"notebookPath": "m.ipynb"}, ["m.ipynb"]),
        ({"filePaths": ["x.py", 3, " y.py ", ""]}, ["x.py", "y.py"]),
        ('{"file_path": "from-json.py"}', ["from-json.py"]),
        ({"path": "not-for-read.py"}, []),
        ({"file_path": "  \u3000 "}, []),
        ({"file_path": 42}, []),
        ('["a.py"]', []),
        ("a.py", []),
        ("{not json", []),
        (None, []),
    ],
)
def test_read_paths_come_from_the_read_tool_fields(tool_input: object, read: list[str]) -> None:
    assert file_evidence([call("Read", tool_input)]) == FileEvidence(read=read, modified=[])


@pytest.mark.parametrize("tool", ["Edit", "MultiEdit", "Write", "NotebookEdit", "write_file"])
@pytest.mark.parametrize(
    ("tool_input", "modified"),
    [
        ({"file_path": "a.py"}, ["a.py"]),
        ({"path": "b.py"}, ["b.py"]),
        ({"notebookPath": "n.ipynb", "filePaths": ["c.py"]}, ["n.ipynb", "c.py"]),
        (
            {"file_path": "a.py", "edits": [{"file_path": "d.py"}, {"path": "e.py"}, "f.py"]},
            ["a.py", "d.py", "e.py"],
        ),
        ('{"path": "g.py"}', ["g.py"]),
        ({"content": "no path here"}, []),
    ],
)
def test_modified_paths_come_from_the_write_tool_fields(
    tool: str, tool_input: object, modified: list[str]
) -> None:
    assert file_evidence([call(tool, tool_input)]) == FileEvidence(read=[], modified=modified)


@pytest.mark.parametrize(
    "tool", ["Glob", "Grep", "LS", "Bash", "WebFetch", "mcp__x__read", "read", "edit"]
)
def test_other_tools_give_no_evidence(tool: str) -> None:
    tool_input = {"file_path": "a.py", "path": "src", "command": "cat b.py > c.py"}
    assert file_evidence([call(tool, tool_input)]) == FileEvidence()


CODEX_PATCH = """*** Begin Patch
*** Update File: src/app.py
@@
-old
+new
*** Add File: docs/new.md
+++ not a header: an added line in the envelope format
*** Delete File: old/gone.py
*** Update File: src/move_me.py
*** Move to: src/moved.py
*** End Patch"""

UNIFIED_DIFF = """diff --git a/lib/x.c b/lib/x.c
--- a/lib/x.c
+++ b/lib/x.c\t2025-01-01 10:00:00
@@ -1 +1 @@
-a
+b
--- a/removed.c
+++ /dev/null
--- /dev/null
+++ added.c
"""


@pytest.mark.parametrize(
    ("patch", "paths"),
    [
        (
            CODEX_PATCH,
            ["src/app.py", "docs/new.md", "old/gone.py", "src/move_me.py", "src/moved.py"],
        ),
        (UNIFIED_DIFF, ["lib/x.c", "added.c"]),
        ("*** Update File:    spaced.py  \r\n", ["spaced.py"]),
        ("*** Update File: a.py\n*** Update File: a.py\n", ["a.py"]),
        ("+++ b/no-preceding-header.py\n", []),
        ("*** Update File: \n", []),
        ("", []),
    ],
)
def test_patch_paths_come_from_file_headers(patch: str, paths: list[str]) -> None:
    assert patch_paths(patch) == paths


@pytest.mark.parametrize(
    ("tool_input", "modified"),
    [
        (
            CODEX_PATCH,
            ["src/app.py", "docs/new.md", "old/gone.py", "src/move_me.py", "src/moved.py"],
        ),
        ({"patch": UNIFIED_DIFF}, ["lib/x.c", "added.c"]),
        ({"input": "*** Add File: i.py\n"}, ["i.py"]),
        (
            {"edits": ["*** Add File: s.py\n", {"patch": "*** Delete File: t.py\n"}, {"x": 1}]},
            ["s.py", "t.py"],
        ),
        ('{"patch": "*** Update File: j.py\\n"}', ["j.py"]),
        ({"file_path": "ignored.py"}, []),
    ],
)
def test_apply_patch_paths_come_from_its_patch_text(
    tool_input: object, modified: list[str]
) -> None:
    assert file_evidence([call("apply_patch", tool_input)]).modified == modified


def test_evidence_keeps_first_seen_order_without_duplicates() -> None:
    calls = [
        call("Read", {"file_path": "b.py"}),
        call("Edit", {"file_path": "a.py"}),
        call("Read", {"file_path": "a.py"}),
        call("Read", {"file_path": " b.py"}),
        call("Write", {"file_path": "a.py"}),
        call("Grep", {"path": "c.py"}),
    ]
    assert file_evidence(calls) == FileEvidence(read=["b.py", "a.py"], modified=["a.py"])


def test_mentioned_paths_cover_path_keys_commands_and_patches() -> None:
    calls = [
        call("Grep", {"pattern": "TODO", "path": "./src"}),
        call("Bash", {"command": "pytest tests/test_a.py -k 'x' && cat README.md > out.txt"}),
        call("Bash", {"command": "echo 1.2.3 --version=2 https://x.io/a.py v1.2"}),
        call("Edit", {"edits": [{"target_file": "deep/e.py"}], "profile": "not-a-path"}),
        call("apply_patch", "*** Update File: p/q.py\n"),
        call("shell", {"cmd": ["bash", "-lc", "sed -i s/a/b/ ./cfg/.env"]}),
    ]
    assert mentioned_paths(calls) == {
        "src",
        "tests/test_a.py",
        "README.md",
        "out.txt",
        "deep/e.py",
        "p/q.py",
        "cfg/.env",
        "s/a/b/",
    }


@pytest.mark.parametrize(
    ("model", "evidence", "batch", "expected"),
    [
        # evidence first, then model paths the batch mentions
        (["b.py"], ["a.py"], {"a.py", "b.py"}, ["a.py", "b.py"]),
        # a model path no tool input mentions is invented: dropped
        (["ghost.py"], ["a.py"], {"a.py"}, ["a.py"]),
        # `./` prefixes do not make a new path; the first spelling is kept
        (["./a.py", "src/b.py"], ["a.py"], {"./src/b.py"}, ["a.py", "src/b.py"]),
        (["a.py"], ["./a.py"], set(), ["./a.py"]),
        # blanks dropped, values trimmed, duplicates removed
        (["", "  ", " c.py ", "c.py"], [], {"c.py"}, ["c.py"]),
        # evidence is trusted even if the batch set is empty
        ([], ["x.py", "x.py"], set(), ["x.py"]),
        ([], [], set(), []),
    ],
)
def test_model_paths_merge_only_when_the_batch_mentions_them(
    model: list[str], evidence: list[str], batch: set[str], expected: list[str]
) -> None:
    assert merge_model_files(model, evidence, batch) == expected


def test_merge_uses_mentioned_paths_end_to_end() -> None:
    calls = [
        call("Read", {"file_path": "src/a.py"}),
        call("Bash", {"command": "grep -rn helper src/util.py"}),
    ]
    evidence = file_evidence(calls)
    merged = merge_model_files(
        ["src/util.py", "src/invented.py", "src/a.py"], evidence.read, mentioned_paths(calls)
    )
    assert merged == ["src/a.py", "src/util.py"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("./a.py", "a.py"),
        ("././a.py", "a.py"),
        (".//a.py", "a.py"),
        (" ./a.py\n", "a.py"),
        ("../a.py", "../a.py"),
        (".env", ".env"),
        ("/abs/./x", "/abs/./x"),
        ("./", ""),
    ],
)
def test_normalise_path_drops_only_leading_dot_slash(path: str, expected: str) -> None:
    assert normalise_path(path) == expected


HASH_A, HASH_B = "a" * 64, "b" * 64
# A two-call turn: a Read and an Edit, hashed by path from the checkout root as the hook does.
TWO_CALLS = [
    call("Read", {"file_path": "/repo/src/a.py"}, {"src/a.py": HASH_A}),
    call("Edit", {"file_path": "/repo/src/b.py", "old_string": "x"}, {"src/b.py": HASH_B}),
]


def _records(*named: tuple[list[str], list[str]]) -> list[ObservationRow]:
    """The rows of one observation per (model files_read, model files_modified) pair."""
    observations = [
        ParsedObservation("discovery", f"o{n}", None, [], "n", [], read, modified)
        for n, (read, modified) in enumerate(named)
    ]
    return observation_rows(
        observations, TWO_CALLS, session="s1", project="p", prompt_number=1,
        created_at=datetime(2025, 1, 1, tzinfo=UTC), model="m", event_ids=["e1", "e2"],
    )  # fmt: skip


def _files(record: ObservationRow) -> tuple[list[str], list[str], dict[str, str | None]]:
    return record.files_read or [], record.files_modified or [], record.file_hashes


def test_each_observation_gets_only_the_files_it_names_and_their_hashes() -> None:
    about_a, about_b = _records((["src/a.py"], []), ([], ["src/b.py"]))
    assert _files(about_a) == (["/repo/src/a.py"], [], {"src/a.py": HASH_A})
    assert _files(about_b) == ([], ["/repo/src/b.py"], {"src/b.py": HASH_B})


@pytest.mark.parametrize(
    ("read", "modified"),
    [
        ([], []),  # names nothing
        (["src/invented.py"], ["ghost.py"]),  # names only paths no call touched
        (["xa.py"], ["rc/b.py"]),  # suffixes that do not start at a `/`
    ],
)
def test_an_observation_naming_no_evidence_file_keeps_the_whole_turn(
    read: list[str], modified: list[str]
) -> None:
    [record] = _records((read, modified))
    whole_turn = (["/repo/src/a.py"], ["/repo/src/b.py"], {"src/a.py": HASH_A, "src/b.py": HASH_B})
    assert _files(record) == whole_turn


def test_a_named_file_stays_read_or_modified_as_the_evidence_says() -> None:
    # The model lists both files as read; the edited one stays modified.
    [record] = _records((["src/b.py", "./src/a.py"], []))
    assert _files(record) == (
        ["/repo/src/a.py"], ["/repo/src/b.py"], {"src/a.py": HASH_A, "src/b.py": HASH_B},
    )  # fmt: skip


def test_a_named_observation_keeps_model_paths_the_batch_mentions_but_no_invented_ones() -> None:
    calls = [
        call("Read", {"file_path": "/repo/a.py"}, {"a.py": HASH_A}),
        call("Read", {"file_path": "/repo/b.py"}, {"b.py": HASH_B}),
        call("Bash", {"command": "grep -n x lib/util.py"}),
    ]
    got = observation_files(
        ["a.py", "lib/util.py", "invented.py"], [], file_evidence(calls),
        {"a.py": HASH_A, "b.py": HASH_B}, mentioned_paths(calls),
    )  # fmt: skip
    assert got == ObservationFiles(
        read=["/repo/a.py", "lib/util.py"], modified=[], hashes={"a.py": HASH_A}
    )


def test_a_single_call_turn_is_unchanged_when_its_file_or_nothing_is_named() -> None:
    calls = [call("Edit", {"file_path": "/repo/src/b.py"}, {"src/b.py": HASH_B})]
    evidence, batch = file_evidence(calls), mentioned_paths(calls)
    today = ObservationFiles(read=[], modified=["/repo/src/b.py"], hashes={"src/b.py": HASH_B})
    for named in ([], ["src/b.py"], ["/repo/src/b.py"], ["b.py"]):
        assert observation_files([], named, evidence, {"src/b.py": HASH_B}, batch) == today


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("src/a.py", "/home/u/proj/src/a.py", True),  # relative model path, absolute evidence
        ("/home/u/proj/src/a.py", "src/a.py", True),  # either way round
        ("./src/a.py", "src/a.py", True),
        ("a.py", "/repo/src/a.py", True),
        ("xa.py", "a.py", False),  # a suffix only at a `/` boundary
        ("src/xa.py", "/repo/src/a.py", False),
        ("/repo/src/a.py", "/other/src/b.py", False),
        ("", "a.py", False),
        ("./", "/repo/a.py", False),
    ],
)
def test_same_file_is_equal_or_a_suffix_at_a_slash(a: str, b: str, same: bool) -> None:
    assert same_file(a, b) is same
    assert same_file(b, a) is same
