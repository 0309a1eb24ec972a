"""Record bench/corpus/json_session.jsonl: a session on another codebase, CPython's `json`.

Run from the repository root: `.venv/bin/python bench/make_corpus_json.py` (seconds). It copies
this Python's own `json` package and its `test_json` suite into a scratch checkout and records a
three-request session there with bench/make_corpus.py's Recorder: Reads and Greps mostly, a few
Edits (never applied: the output is the patch Claude Code would report) and unittest runs,
each request closed by a summary. A different shape from session.jsonl (which edits memq
itself): `bench/tokens.py` replays both, so the observer's cost is not tuned to one session.
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.make_corpus import Recorder, docstring_edits_in
from pipeline.events import ToolCall, encode_event

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "corpus" / "json_session.jsonl"
CHECKOUT = Path("/tmp/memq-corpus/jsonlib")
SESSION = "8c4f1e2a-6b3d-4f5e-a1c9-2e7d5b3a9f10"
UNITTEST = f"{Path(sys.executable).name} -m unittest"
PROMPTS = (
    "A user reports that json.loads('[1, 2,]') says 'Expecting value' and they could not tell "
    "the trailing comma was the problem. Find where the decoder raises that and make the "
    "message say 'Illegal trailing comma' for arrays and objects, with tests.",
    "While you are there: check that deeply nested input fails with RecursionError rather than "
    "crashing, for both the C and the Python scanner, and add a test if one is missing.",
    "Last thing: the docstrings of object_pairs_hook and object_hook don't say which wins when "
    "both are given. Read the code, confirm, and fix the docs in decoder.py and __init__.py.",
)
SUMMARIES = (
    "The Python scanner now raises 'Illegal trailing comma before end of array' (and of object) "
    "from JSONArray/JSONObject in json/decoder.py; tests added in test_fail.py. The C scanner "
    "(_json) keeps its own message, noted in the test.",
    "Deep nesting raises RecursionError in both scanners (test_recursion.py covers arrays and "
    "objects for py and c); I added a case for a mix of both at 100,000 levels.",
    "object_pairs_hook takes priority over object_hook; the docstrings of JSONDecoder and "
    "json.loads now say so, matching decoder.py's JSONObject.",
)


def checkout() -> Path:
    """A scratch copy of this Python's json package and its tests."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    shutil.rmtree(CHECKOUT, ignore_errors=True)
    shutil.copytree(
        stdlib / "json", CHECKOUT / "json", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(stdlib / "test" / "test_json", CHECKOUT / "tests" / "test_json",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    (CHECKOUT / "tests" / "__init__.py").write_text("")
    return CHECKOUT


def run_tests(r: Recorder, module: str, why: str) -> None:
    r.bash(f"{UNITTEST} tests.test_json.{module} -v 2>&1 | tail -25", why)


def first_request(r: Recorder) -> None:
    r.prompt(PROMPTS[0], 1)
    r.bash("ls -la json tests/test_json", "Look at the layout")
    r.glob("json/*.py")
    r.grep("Expecting value", "json", content=True)
    r.grep("Expecting value", "tests", content=True)
    r.read("json/decoder.py")
    r.read("json/scanner.py")
    r.grep("def JSONArray", "json", content=True)
    r.read("json/decoder.py", 210, 60)
    r.grep("def JSONObject", "json", content=True)
    r.read("json/decoder.py", 130, 85)
    r.read("tests/test_json/test_fail.py")
    r.read("tests/test_json/__init__.py")
    run_tests(r, "test_fail", "Run the failure tests before changing anything")
    r.bash(f"{Path(sys.executable).name} -c \"import json; json.loads('[1, 2,]')\" 2>&1 | tail -3",
           "Reproduce the report")  # fmt: skip
    r.grep("JSONDecodeError", "json", content=True)
    r.read("json/__init__.py", 290, 70)
    r.grep("StopIteration", "json", content=True)
    r.read("json/decoder.py", 0, 60)
    r.grep("def py_scanstring|def _decode_uXXXX", "json", content=True)
    r.edit(
        "json/decoder.py",
        "    if nextchar == ']':\n        return values, end + 1\n",
        "    if nextchar == ']':\n        return values, end + 1\n    # trailing comma\n",
    )
    run_tests(r, "test_fail", "Re-run after the first edit")
    r.grep("trailing comma", ".", content=True)
    r.read("tests/test_json/test_decode.py")
    r.edit(
        "tests/test_json/test_fail.py",
        "class TestFail:\n",
        "class TestFail:\n    def test_trailing_comma_message(self):\n"
        "        with self.assertRaises(self.JSONDecodeError) as cm:\n"
        "            self.loads('[1, 2,]')\n        self.assertIn('comma', str(cm.exception))\n\n",
    )
    run_tests(r, "test_fail", "Run the new test")
    r.grep("test_extra_data|test_truncated_input", "tests", content=True)
    r.read("tests/test_json/test_fail.py", 80, 80)
    run_tests(r, "test_decode", "Make sure decoding still works")
    for module in ("test_pass2", "test_pass3", "test_tool"):
        r.read(f"tests/test_json/{module}.py", 0, 80)
    r.grep("Expecting ',' delimiter|Expecting property name", "json", content=True)
    run_tests(r, "test_fail", "All failure tests once more")
    r.bash("git diff --stat 2>/dev/null || echo 'not a git checkout'", "What changed")
    r.summarize(SUMMARIES[0], end=False)


def second_request(r: Recorder) -> None:
    r.prompt(PROMPTS[1], 2)
    r.glob("tests/test_json/test_*.py")
    r.read("tests/test_json/test_recursion.py")
    r.grep("RecursionError", ".", content=True)
    r.grep("Py_EnterRecursiveCall|recursion", "json", content=True)
    r.read("json/scanner.py", 0, 80)
    r.grep("c_make_scanner", ".", content=True)
    r.grep("import_fresh_module", "tests", content=True)
    run_tests(r, "test_recursion", "Run the recursion tests")
    deep = "json.loads('[' * 100000 + ']' * 100000)"
    r.bash(f"{Path(sys.executable).name} -c \"import json; {deep}\" 2>&1 | tail -2",
           "Try deep nesting by hand")  # fmt: skip
    r.read("tests/test_json/test_recursion.py", 60, 60)
    r.edit(
        "tests/test_json/test_recursion.py",
        "    def test_highly_nested_objects_decoding(self):\n",
        "    def test_mixed_nesting_decoding(self):\n"
        "        with self.assertRaises(RecursionError):\n"
        "            self.loads('[{\"a\":' * 100000 + '1' + '}]' * 100000)\n\n"
        "    def test_highly_nested_objects_decoding(self):\n",
    )
    run_tests(r, "test_recursion", "Run the new case")
    for path in ("json/encoder.py", "json/__init__.py", "tests/test_json/test_scanstring.py",
                 "tests/test_json/test_speedups.py"):  # fmt: skip
        r.read(path, 0, 120)
    r.grep("def test_", "tests/test_json", content=True)
    run_tests(r, "test_speedups", "The C-accelerated paths")
    run_tests(r, "test_scanstring", "String scanning")
    r.grep("check_circular|markers", "json", content=True)
    r.grep("sys.getrecursionlimit|setrecursionlimit", ".", content=True)
    r.read("tests/test_json/test_recursion.py", 0, 40)
    run_tests(r, "test_dump", "Dumping is untouched")
    r.read("json/encoder.py", 200, 120)
    run_tests(r, "test_recursion", "Recursion tests once more")
    r.summarize(SUMMARIES[1], end=False)


def third_request(r: Recorder) -> None:
    r.prompt(PROMPTS[2], 3)
    r.grep("object_pairs_hook", ".", content=True)
    r.grep("object_hook", "json", content=True)
    r.read("json/__init__.py", 0, 140)
    r.read("json/__init__.py", 270, 90)
    r.read("json/decoder.py", 250, 110)
    r.grep("pairs_hook", "tests", content=True)
    r.read("tests/test_json/test_decode.py", 0, 60)
    run_tests(r, "test_decode", "Confirm which hook wins today")
    for path in ("json/decoder.py", "json/__init__.py"):
        for old, new in docstring_edits_in(CHECKOUT / path, 2):
            r.edit(path, old, new)
            run_tests(r, "test_decode", "Docs only: decoding tests still pass")
    r.bash(f"{Path(sys.executable).name} -m doctest -v json/__init__.py 2>&1 | tail -5",
           "Doctests of the package")  # fmt: skip
    for module in ("test_default", "test_dump", "test_indent", "test_separators", "test_unicode",
                   "test_float", "test_enum", "test_pass1"):  # fmt: skip
        r.read(f"tests/test_json/{module}.py", 0, 60)
        r.grep(r"def test_\w+", f"tests/test_json/{module}.py", content=True)
    run_tests(r, "test_pass1", "Round trip of the pass files")
    r.grep("object_pairs_hook", "tests", content=True)
    r.read("json/decoder.py", 280, 80)
    r.bash(f"{UNITTEST} discover -s tests/test_json -t . 2>&1 | tail -4", "The whole json suite")
    r.read("json/tool.py", 0, 90)
    r.grep("sort_keys|indent", "json/__init__.py", content=True)
    r.bash(f"{UNITTEST} tests.test_json.test_decode tests.test_json.test_fail 2>&1 | tail -3",
           "Final check of the decoder tests")  # fmt: skip
    r.summarize(SUMMARIES[2])


def main() -> None:
    started = time.monotonic()
    root = checkout()
    recorder = Recorder(root=root, session=SESSION, project="jsonlib")
    first_request(recorder)
    second_request(recorder)
    third_request(recorder)
    calls = sum(isinstance(e, ToolCall) for e in recorder.events)
    tools = Counter(e.tool_name for e in recorder.events if isinstance(e, ToolCall))
    if calls < 90:
        raise SystemExit(f"only {calls} tool calls recorded; the corpus needs at least 90")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(b"".join(encode_event(e) + b"\n" for e in recorder.events))
    print(json.dumps({"wrote": str(OUT.relative_to(REPO)), "events": len(recorder.events),
                      "tool_calls": calls, "tools": dict(tools.most_common()),
                      "mb": round(OUT.stat().st_size / 1e6, 2),
                      "seconds": round(time.monotonic() - started)}))  # fmt: skip


if __name__ == "__main__":
    main()
