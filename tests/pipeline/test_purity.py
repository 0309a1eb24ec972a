"""pipeline/ stays pure: no module opens, lists or probes files, reads the environment or a clock.

ruff's banned-api rule keeps I/O clients out of pipeline/; this walks each module's syntax
tree for the stdlib calls that rule cannot see (docstrings and comments do not count). The one
exception is DESIGN's: mode files are read by `load_mode` in pipeline/prompting/mode_files.py, which
may read files and nothing else (no environment, no clock).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
# Path/file methods that touch the disk, whatever object they are called on.
_DISK_METHODS = frozenset(
    {
        "read_text",
        "read_bytes",
        "write_text",
        "write_bytes",
        "glob",
        "rglob",
        "iterdir",
        "is_dir",
        "is_file",
        "exists",
    }
)
# (module name as written, attribute): the environment and the clock.
_IMPURE_ATTRIBUTES = frozenset(
    {
        ("os", "environ"),
        ("os", "getenv"),
        ("time", "time"),
        ("time", "time_ns"),
        ("time", "monotonic"),
        ("time", "perf_counter"),
        ("datetime", "now"),
        ("datetime", "utcnow"),
        ("datetime", "today"),
        ("date", "today"),
    }
)


def impurities(source: str) -> list[str]:
    """Each impure use in `source`, as `line N: what`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        what = _impurity(node)
        if what is not None:
            found.append(f"line {getattr(node, 'lineno', '?')}: {what}")
    return found


def _impurity(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
        return "open("
    if isinstance(node, ast.Attribute):
        if node.attr in _DISK_METHODS:
            return f".{node.attr}"
        if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in _IMPURE_ATTRIBUTES:
            return f"{node.value.id}.{node.attr}"
    if isinstance(node, ast.ImportFrom) and node.module in {"os", "time", "datetime"}:
        for alias in node.names:
            if (node.module, alias.name) in _IMPURE_ATTRIBUTES:
                return f"from {node.module} import {alias.name}"
    if isinstance(node, ast.Name) and node.id == "__file__":
        return "__file__ (locating files on disk)"
    return None


def _modules() -> list[Path]:
    return sorted(PIPELINE.rglob("*.py"))


SANCTIONED_READER = PIPELINE / "prompting" / "mode_files.py"
_FILE_READS = ("open(", "__file__", *(f".{m}" for m in _DISK_METHODS if "write" not in m))


def _allowed(path: Path, found: str) -> bool:
    what = found.split(": ", 1)[1]
    return path == SANCTIONED_READER and what.startswith(_FILE_READS)


def test_the_package_has_modules_to_check() -> None:
    assert {p.name for p in _modules()} >= {"__init__.py", "modes.py", "prompts.py"}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(PIPELINE).as_posix())
def test_pipeline_module_does_no_io_and_reads_no_clock(path: Path) -> None:
    found = impurities(path.read_text(encoding="utf-8"))
    assert [f for f in found if not _allowed(path, f)] == []


def test_only_the_mode_loader_reads_files_and_it_still_does() -> None:
    # If the loader stopped reading files, the exception above would be dead weight.
    readers = [p for p in _modules() if impurities(p.read_text(encoding="utf-8"))]
    assert readers == [SANCTIONED_READER]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("open('x')", "open("),
        ("p.read_text()", ".read_text"),
        ("p.read_bytes()", ".read_bytes"),
        ("d.glob('*.json')", ".glob"),
        ("p.is_dir()", ".is_dir"),
        ("p.is_file()", ".is_file"),
        ("p.exists()", ".exists"),
        ("os.environ['HOME']", "os.environ"),
        ("from os import environ", "from os import environ"),
        ("time.time()", "time.time"),
        ("from time import monotonic", "from time import monotonic"),
        ("datetime.now(UTC)", "datetime.now"),
        ("HERE = __file__", "__file__"),
    ],
)
def test_the_guard_catches_each_kind(source: str, expected: str) -> None:
    (found,) = impurities(source)
    assert expected in found


def test_the_guard_ignores_words_in_strings_and_pure_datetime_use() -> None:
    source = '"""Never open( a file or call time.time()."""\nstamp = when.astimezone(UTC)\n'
    assert impurities(source) == []
