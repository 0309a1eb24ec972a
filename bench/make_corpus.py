"""Record bench/corpus/session.jsonl: a coding session on this repository, from real commands.

Run from the repository root: `.venv/bin/python bench/make_corpus.py [--out PATH]` (about a
minute: it runs pytest and ruff several times; the default output is the committed corpus).
Every tool call's output is produced now, on this checkout, with the paths of today's layout
(pipeline/prompting/truncate.py, worker/sessions/turn.py, ...): Read returns the file's text with
line numbers as Claude Code shows it, Grep runs grep, Glob globs, Bash runs the command (pytest
and ruff from the running interpreter's venv, git log, ls, wc). Edit calls replace real snippets
but are never applied: the output is the patch Claude Code would report. A path that does not
exist, an edit with no snippet to replace or a command that fails stops the run with a one-line
error. The events are memq's wire format (pipeline/events.py), as `memq hook claude-code` would
publish them.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.events import End, Event, Prompt, Summarize, ToolCall, encode_event

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "corpus" / "session.jsonl"
SESSION = "5d0c6a3e-2b7f-4c1e-9a8d-7f3e2c1b0a94"
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
READ_MAX_LINES = 2000  # Claude Code's Read defaults
READ_MAX_LINE_CHARS = 2000
BASH_MAX_CHARS = 30_000  # Claude Code truncates longer Bash output
_SKIP_DIRS = {".venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
              ".hypothesis", "memq.egg-info", "corpus", "secrets"}  # fmt: skip
PROMPTS = (
    "Observation prompts sometimes show an elision marker for tool outputs that are barely over "
    "the budget. Check how pipeline/prompting/truncate.py splits a field and how "
    "pipeline/prompting/prompts.py frames it, and add tests for the edge cases (exactly at the "
    "budget, multi-byte text).",
    "Now follow field_budget_chars through the worker: settings, conversation, turn runner and "
    "both observer adapters. Make sure the summary prompt and dropped outputs respect a budget "
    "too, and keep ruff and the pipeline tests green.",
)
FINAL_MESSAGE = (
    "Truncation now counts the tool's own characters: a field exactly at the budget is kept "
    "whole, and the head/tail split never cuts a surrogate pair. I added parametrized cases to "
    "tests/pipeline/prompting/test_truncate.py and tests/pipeline/prompting/test_framing.py, "
    "traced field_budget_chars from Settings through TurnRunner and conversation.user_message "
    "into build_observation_prompt, and checked that dropped replies (pipeline/turns/settle.py) "
    "are cut with the same helper. ruff and the pipeline tests pass."
)


class Recorder:
    """Runs tool calls for real and collects them as events with a plausible clock."""

    def __init__(
        self,
        root: Path = REPO,
        session: str = SESSION,
        project: str = "memq",
        *,
        check_commands: bool = False,
    ) -> None:
        self.events: list[Event] = []
        self.clock = START
        self.root = root
        self.session = session
        self.project = project
        self.check_commands = check_commands  # a failing Bash command stops the run

    def _id(self) -> str:
        return f"corpus-{len(self.events) + 1:04d}"

    def prompt(self, text: str, number: int) -> None:
        self.clock += timedelta(seconds=20)
        self.events.append(Prompt(event_id=self._id(), memory_session_id=self.session,
                                  project=self.project,
                                  occurred_at=self.clock, agent="claude-code",
                                  prompt_text=text, prompt_number=number))  # fmt: skip

    def tool(self, name: str, tool_input: dict[str, Any], output: Any, seconds: float) -> None:
        self.clock += timedelta(seconds=round(4 + seconds, 1))
        digest = hashlib.sha256(f"{len(self.events)}{name}{tool_input}".encode()).hexdigest()
        self.events.append(ToolCall(
            event_id=self._id(), memory_session_id=self.session, project=self.project,
            occurred_at=self.clock, agent="claude-code", tool_name=name, tool_input=tool_input,
            tool_output=output, cwd=str(self.root), tool_use_id=f"toolu_01{digest[:22]}",
        ))  # fmt: skip

    def read(self, path: str, offset: int = 0, limit: int | None = None) -> None:
        lines = _text(self.root / path, errors="replace").splitlines()
        if offset and offset >= len(lines):
            raise SystemExit(
                f"make_corpus: {path} has {len(lines)} lines, cannot read from {offset}"
            )
        end = min(len(lines), offset + (limit or READ_MAX_LINES))
        shown = "\n".join(
            f"{n + 1:>6}→{lines[n][:READ_MAX_LINE_CHARS]}" for n in range(offset, end)
        )
        tool_input: dict[str, Any] = {"file_path": str(self.root / path)}
        if offset or limit:
            tool_input |= {"offset": offset + 1, "limit": limit or READ_MAX_LINES}
        self.tool("Read", tool_input, shown, 0.1)

    def bash(self, command: str, description: str) -> None:
        started = time.monotonic()
        done = subprocess.run(command, shell=True, cwd=self.root, capture_output=True, text=True,
                              timeout=300, env=_bash_env(), check=False)  # fmt: skip
        seconds = time.monotonic() - started
        if self.check_commands and done.returncode != 0:
            raise SystemExit(f"make_corpus: `{command}` exited {done.returncode}")
        output = {
            "stdout": _cap(done.stdout.rstrip("\n")),
            "stderr": _cap(done.stderr.rstrip("\n")),
            "interrupted": False,
            "isImage": False,
        }
        self.tool("Bash", {"command": command, "description": description}, output, seconds)

    def grep(
        self, pattern: str, path: str = ".", content: bool = False, glob: str = "*.py"
    ) -> None:
        flag = "-rnE" if content else "-rlE"
        excludes = [f"--exclude-dir={d}" for d in sorted(_SKIP_DIRS)] + ["--exclude=make_corpus.py"]
        args = ["grep", flag, f"--include={glob}", *excludes, "--", pattern, path]
        found = subprocess.run(args, cwd=self.root, capture_output=True, text=True,
                               check=False).stdout  # fmt: skip
        lines = sorted(line.removeprefix("./") for line in found.splitlines())
        tool_input: dict[str, Any] = {"pattern": pattern, "path": str(self.root / path),
                                      "glob": glob}  # fmt: skip
        if content:
            tool_input |= {"output_mode": "content", "-n": True}
            output: dict[str, Any] = {
                "mode": "content", "numFiles": 0, "filenames": [],
                "content": "\n".join(lines), "numLines": len(lines),
            }  # fmt: skip
        else:
            files = [str(self.root / f) for f in lines]
            output = {"mode": "files_with_matches", "filenames": files, "numFiles": len(files)}
        self.tool("Grep", tool_input, output, 0.2)

    def glob(self, pattern: str) -> None:
        files = sorted(str(p) for p in self.root.glob(pattern) if not _skipped(p, self.root))
        output = {"filenames": files[:100], "durationMs": 14, "numFiles": min(len(files), 100),
                  "truncated": len(files) > 100}  # fmt: skip
        self.tool("Glob", {"pattern": pattern}, output, 0.1)

    def edit(self, path: str, old: str, new: str) -> None:
        text = _text(self.root / path)
        if text.count(old) != 1:
            raise SystemExit(f"edit snippet is not unique in {path}: {old!r}")
        patch = _hunks(text, text.replace(old, new))
        file_path = str(self.root / path)
        tool_input = {"file_path": file_path, "old_string": old, "new_string": new}
        output = {"filePath": file_path, "oldString": old, "newString": new,
                  "structuredPatch": patch, "userModified": False, "replaceAll": False}  # fmt: skip
        self.tool("Edit", tool_input, output, 1.0)

    def summarize(self, message: str = FINAL_MESSAGE, *, end: bool = True) -> None:
        self.clock += timedelta(seconds=30)
        self.events.append(Summarize(event_id=self._id(), memory_session_id=self.session,
                                     project=self.project, occurred_at=self.clock,
                                     agent="claude-code",
                                     last_assistant_message=message))  # fmt: skip
        if not end:
            return
        self.clock += timedelta(minutes=2)
        self.events.append(End(event_id=self._id(), memory_session_id=self.session,
                               project=self.project, occurred_at=self.clock, agent="claude-code",
                               reason="prompt_input_exit"))  # fmt: skip


def _bash_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
            "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1"}  # fmt: skip


def _text(path: Path, errors: str = "strict") -> str:
    """A file's text; a missing file stops the run with one line naming it."""
    if not path.is_file():
        raise SystemExit(f"make_corpus: no such file: {path}")
    return path.read_text(errors=errors)


def _cap(text: str) -> str:
    if len(text) <= BASH_MAX_CHARS:
        return text
    return text[:BASH_MAX_CHARS] + f"\n\n... [{len(text) - BASH_MAX_CHARS} characters truncated]"


def _skipped(path: Path, root: Path = REPO) -> bool:
    return any(part in _SKIP_DIRS for part in path.relative_to(root).parts)


def _hunks(before: str, after: str) -> list[dict[str, Any]]:
    """Claude Code's structuredPatch: unified-diff hunks with three lines of context."""
    a, b = before.splitlines(), after.splitlines()
    hunks = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(3):
        lines: list[str] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + line for line in a[i1:i2]]
            else:
                lines += ["-" + line for line in a[i1:i2]] + ["+" + line for line in b[j1:j2]]
        first, last = group[0], group[-1]
        hunks.append({"oldStart": first[1] + 1, "oldLines": last[2] - first[1],
                      "newStart": first[3] + 1, "newLines": last[4] - first[3],
                      "lines": lines})  # fmt: skip
    return hunks


def docstring_edits(path: str, limit: int) -> Iterator[tuple[str, str]]:
    """Real one-line docstrings of a file with a reworded replacement (old, new); none stops."""
    edits = list(docstring_edits_in(REPO / path, limit))
    if not edits:
        raise SystemExit(f"make_corpus: no one-line docstring to edit in {path}")
    return iter(edits)


def docstring_edits_in(path: Path, limit: int) -> Iterator[tuple[str, str]]:
    """`docstring_edits` for a file anywhere; a file without one yields nothing."""
    text = _text(path)
    found = re.findall(r'^( +)"""([^"\n]{20,90})"""$', text, re.M)
    seen = 0
    for indent, doc in found:
        old = f'{indent}"""{doc}"""'
        if text.count(old) == 1 and seen < limit:
            seen += 1
            yield old, f'{indent}"""{doc.rstrip(".")}; see the tests for the edge cases."""'


def definitions(path: str) -> list[str]:
    """Top-level function names a file defines."""
    return re.findall(r"^def ([a-z_][a-z0-9_]*)\(", _text(REPO / path), re.M)


def _venv_bin() -> str:
    """The running interpreter's bin directory, relative to the checkout when inside it."""
    bin_dir = Path(sys.executable).parent
    return str(bin_dir.relative_to(REPO)) if bin_dir.is_relative_to(REPO) else str(bin_dir)


VENV_BIN = _venv_bin()
# Where each pipeline module lives today (pipeline/<room>/<module>.py; tests mirror the rooms).
ROOMS = {"truncate": "prompting", "framing": "prompting", "prompts": "prompting",
         "conversation": "prompting", "modes": "prompting", "textnorm": "replies",
         "parser": "replies", "classify": "replies", "batching": "turns",
         "content_hash": "turns", "evidence": "turns", "privacy": "redaction",
         "redact": "redaction", "events": ""}  # fmt: skip


def src(module: str) -> str:
    return str(Path("pipeline", ROOMS[module], f"{module}.py"))


def test_of(module: str) -> str:
    return str(Path("tests", "pipeline", ROOMS[module], f"test_{module}.py"))


def pytest_command(*modules: str) -> str:
    return f"{VENV_BIN}/pytest -q " + " ".join(test_of(m) for m in modules)


PYTEST = pytest_command("truncate")
RUFF = f"{VENV_BIN}/ruff check"


def test_edits(path: str, limit: int) -> Iterator[tuple[str, str]]:
    """A new parametrized test inserted before real test functions of a file (old, new)."""
    text = _text(REPO / path)
    names = [n for n in re.findall(r"^def (test_[a-z0-9_]+)\(", text, re.M)[:limit]
             if text.count(f"def {n}(") == 1]  # fmt: skip
    if not names:
        raise SystemExit(f"make_corpus: no test function to edit in {path}")
    for name in names:
        old = f"def {name}("
        new = (
            f'@pytest.mark.parametrize("length", [15_999, 16_000, 16_001])\n'
            f"def {name}_at_the_budget_edge(length: int) -> None:\n"
            f'    text = "\\u00e9" * length\n'
            f"    assert len(truncate_observation_field(text)) <= max(length, 16_100)\n\n\n{old}"
        )
        yield old, new


def explore(r: Recorder, path: str) -> None:
    """Find who uses a module's first function, then read the module."""
    names = definitions(path)
    if names:
        r.grep(rf"\b{names[0]}\(", content=True)
    r.read(path)


def first_request(r: Recorder) -> None:
    r.prompt(PROMPTS[0], 1)
    r.bash("ls -la", "List the repository root")
    r.bash("git --no-pager log --oneline -20", "Recent commits")
    r.glob("pipeline/**/*.py")
    r.glob("tests/pipeline/**/*.py")
    r.read(src("truncate"))
    r.read(src("framing"))
    r.grep("split_observation_field")
    r.grep("split_observation_field", content=True)
    r.read(src("prompts"))
    r.read(test_of("truncate"))
    r.bash(PYTEST, "Run the truncation tests")
    r.grep("OBSERVATION_FIELD_MAX_CHARS", content=True)
    r.grep("elided", content=True)
    r.read(src("textnorm"))
    r.read(test_of("framing"))
    r.read(test_of("prompts"), 0, 120)
    r.read("pipeline/__init__.py")
    for old, new in docstring_edits(src("truncate"), 4):
        r.edit(src("truncate"), old, new)
        r.bash(PYTEST, "Re-run the truncation tests")
        r.read(src("truncate"), 0, 60)
    for old, new in test_edits(test_of("truncate"), 6):
        r.edit(test_of("truncate"), old, new)
        r.bash(PYTEST, "Run the new edge cases")
        r.bash(f"{RUFF} {test_of('truncate')}", "Lint the test file")
    r.grep("^def test_", "tests/pipeline", content=True)
    for old, new in docstring_edits(src("framing"), 3):
        r.edit(src("framing"), old, new)
        r.bash(pytest_command("framing"), "Run the framing tests")
        r.bash(f"{RUFF} {src('framing')}", "Lint framing")
    for old, new in test_edits(test_of("framing"), 4):
        r.edit(test_of("framing"), old, new)
        r.bash(pytest_command("framing"), "Run the framing tests")
        r.bash(f"{RUFF} {test_of('framing')}", "Lint the framing tests")
    r.bash(f"{RUFF} .", "Lint everything")
    r.bash("wc -l pipeline/*.py pipeline/*/*.py", "Module sizes")
    r.bash(f"git --no-pager log --oneline -5 --follow -- {src('truncate')}",
           "History of truncate.py")  # fmt: skip
    for module in ("batching", "classify", "content_hash", "evidence", "parser", "privacy",
                   "redact", "events", "modes"):  # fmt: skip
        explore(r, src(module))
        if module != "events":  # pipeline/events.py is tested through its users
            r.read(test_of(module), 0, 100)
    r.bash(PYTEST, "Truncation tests once more")


# The modules a field budget passes through on its way from Settings to the observer.
WORKER_MODULES = (
    "worker/settings.py", src("conversation"), "worker/sessions/turn.py",
    "worker/sessions/session_run.py", "worker/sessions/observer_state.py",
    "worker/observers/anthropic.py", "worker/observers/openai.py",
    "worker/observers/protocol.py", "worker/observers/errors.py",
    "pipeline/turns/turn_records.py", "worker/storage/records.py", "pipeline/outcomes.py",
    "worker/sessions/runtime.py", "worker/sessions/jobs.py", "worker/queue/streams.py",
    "worker/sessions/outbox.py", "worker/queue/leases.py", "worker/queue/scheduling.py",
)  # fmt: skip
WORKER_TESTS = (
    "tests/worker/test_settings.py", "tests/worker/sessions/test_turn.py",
    "tests/worker/sessions/test_session_run.py", "tests/worker/sessions/test_session_parts.py",
    "tests/worker/sessions/test_outbox.py", "tests/worker/observers/test_observers.py",
    "tests/worker/test_fake_observer.py", "tests/worker/cli/test_cli_prompt.py",
    "tests/worker/ingest/test_producer.py", "tests/worker/limits/test_budget.py",
)  # fmt: skip


def second_request(r: Recorder) -> None:
    r.prompt(PROMPTS[1], 2)
    r.grep("field_budget_chars")
    r.grep("field_budget_chars", content=True)
    r.bash("ls worker worker/sessions worker/observers worker/storage", "Worker layout")
    r.glob("worker/**/*.py")
    for path in WORKER_MODULES:
        explore(r, path)
    r.read("worker/storage/sqlite/store.py", 0, 120)
    r.read("worker/storage/sqlite/store.py", 120, 120)
    r.read("worker/storage/sqlite/schema.py", 0, 120)
    for path in ("worker/sessions/turn.py", src("conversation"), src("prompts")):
        r.read(path, 40, 80)
    r.grep("truncate_observation_field", content=True)
    r.grep("DROPPED_RAW_CHARS", content=True)
    for symbol in ("ObserverRequest", "bounded_history", "plan_turns", "build_observation_prompt",
                   "user_message", "class .*Observer\\b", "Exchange\\("):  # fmt: skip
        r.grep(symbol, content=True)
    for setting in ("batch_max_chars", "history_turns", "history_chars", "max_event_bytes"):
        r.grep(setting, content=True)
    for test_file in WORKER_TESTS:
        r.read(test_file, 0, 80)
    for path in (src("conversation"), "worker/sessions/turn.py", src("prompts"),
                 "worker/observers/anthropic.py", "worker/observers/openai.py"):  # fmt: skip
        for old, new in docstring_edits(path, 3):
            r.edit(path, old, new)
            r.bash(f"{RUFF} {path}", "Lint the edited module")
            r.bash(pytest_command("prompts"), "Run the prompt tests")
    r.bash("ls tests tests/worker tests/pipeline tests/pipeline/prompting", "Test layout")
    r.glob("tests/**/*.py")
    for pattern in ("modes/*.json", "worker/observers/*.py", "bench/*.py", "tests/support/*.py"):
        r.glob(pattern)
    r.read("modes/code.json")
    for module in ("truncate", "framing", "prompts", "parser", "classify", "content_hash"):
        r.bash(pytest_command(module), f"Run test_{module}")
    for module in ("prompts", "framing", "parser", "classify"):
        r.read(test_of(module), 0, 80)
    r.bash(pytest_command("truncate", "framing", "prompts"), "Run the affected pipeline tests")
    r.bash("git --no-pager log --oneline -10 -- worker/", "Recent worker commits")
    r.bash(f"{RUFF} .", "Lint everything")
    r.bash(PYTEST, "Final truncation test run")
    r.bash("git --no-pager log --oneline -3", "Where we are")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = OUT.relative_to(REPO)
    parser.add_argument("--out", type=Path, default=OUT,
                        help=f"where to write the corpus (default: {default})")  # fmt: skip
    out = parser.parse_args().out.resolve()
    started = time.monotonic()
    recorder = Recorder(check_commands=True)
    first_request(recorder)
    second_request(recorder)
    recorder.summarize()
    calls = sum(isinstance(e, ToolCall) for e in recorder.events)
    tools = Counter(e.tool_name for e in recorder.events if isinstance(e, ToolCall))
    if calls < 200:
        raise SystemExit(f"only {calls} tool calls recorded; the corpus needs at least 200")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"".join(encode_event(e) + b"\n" for e in recorder.events))
    size = out.stat().st_size
    shown = out.relative_to(REPO) if out.is_relative_to(REPO) else out
    print(f"wrote {shown}: {len(recorder.events)} events, {calls} tool calls, "
          f"({dict(tools.most_common())}), {size / 1e6:.2f} MB in "
          f"{time.monotonic() - started:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
