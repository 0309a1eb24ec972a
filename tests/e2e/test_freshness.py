"""Memories that know when their files changed: through the real hook, worker and read surfaces."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver, Reply
from tests.support.ingest import console_script, subprocess_env
from tests.support.worker_harness import drain, make_settings, running_runtime, sqlite_store
from worker.search import mcp_tools
from worker.search.freshness import Freshness
from worker.settings import Settings
from worker.storage.records import StoredRow

SESSION = "fresh-s1"
V1 = "def login():\n    return True\n"


def _checkouts(tmp_path: Path) -> tuple[Path, Path]:
    """A repository `proj` and a linked worktree of it elsewhere, both holding the same files."""
    main, other = tmp_path / "proj", tmp_path / "elsewhere" / "proj-wt"
    (main / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (main / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    other.mkdir(parents=True)
    (other / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    for root in (main, other):
        (root / "src").mkdir()
        (root / "src" / "app.py").write_text(V1)
        (root / "notes.md").write_text("# notes\n")
    return main, other


def _run(args: list[str], cwd: Path, data: Path, redis_url: str, stdin: str = "") -> str:
    done = subprocess.run(
        [console_script(), *args], input=stdin, capture_output=True, text=True, timeout=60,
        cwd=cwd, env=subprocess_env(data, redis_url, MEMQ_CHROMA="off"), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _hook(payload: dict[str, Any], cwd: Path, data: Path, redis_url: str) -> str:
    return _run(["hook", "claude-code"], cwd, data, redis_url, json.dumps(payload))


def _tool(cwd: Path, n: int, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolUse", "session_id": SESSION, "cwd": str(cwd),
        "tool_name": name, "tool_input": tool_input, "tool_response": {"success": True},
        "tool_use_id": f"toolu_fresh_{n}",
    }  # fmt: skip


def _context(cwd: Path, data: Path, redis_url: str, *flags: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(_run(["context", "--json", *flags], cwd, data, redis_url))
    return result


def _edit_app_and_read_notes(main: Path, data: Path, redis_url: str) -> tuple[Path, Path]:
    """Publish one session's Edit of src/app.py and Read of notes.md; the two paths."""
    app, notes = main / "src" / "app.py", main / "notes.md"
    # Claude Code names files by absolute path; the edit has happened when the hook runs.
    _hook(_tool(main, 1, "Edit", {"file_path": str(app), "old_string": "x", "new_string": "y"}),
          main, data, redis_url)  # fmt: skip
    _hook(_tool(main, 2, "Read", {"file_path": str(notes)}), main, data, redis_url)
    return app, notes


async def _observe(settings: Settings, arq_redis: ArqRedis) -> list[StoredRow]:
    """Run a worker until every published call is observed; the stored observations."""
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)
    store = sqlite_store(settings)
    try:
        return await store.observations(project="proj")
    finally:
        await store.aclose()


def _stale(cwd: Path, data: Path, redis_url: str) -> list[str]:
    """The stale files of the session's observations (naming no files, each has the batch's)."""
    rows = _context(cwd, data, redis_url)["observations"]
    assert len(rows) == 2
    assert rows[0]["stale_files"] == rows[1]["stale_files"]
    stale: list[str] = rows[0]["stale_files"]
    return stale


async def test_an_observation_marks_its_files_changed_since_on_every_read_surface(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    main, other = _checkouts(tmp_path)
    data = tmp_path / "data"
    app, notes = _edit_app_and_read_notes(main, data, redis_url)
    settings = make_settings(data, redis_url, fake_observer.url)
    rows = await _observe(settings, arq_redis)
    # One batch, one observation per call; the fake observer names no files, so each knows
    # the whole batch's files, by relative path.
    assert [r.file_hashes and set(r.file_hashes) for r in rows] == [{"src/app.py", "notes.md"}] * 2
    [row] = [r for r in rows if (r.title or "").startswith("Edit")]
    assert _stale(main, data, redis_url) == []

    app.write_text(V1 + "# edited later\n")
    assert _stale(main, data, redis_url) == [str(app)]
    text = _run(["context"], main, data, redis_url)
    assert "(changed since: app.py)" in text
    [hit] = json.loads(_run(["search", "Edit", "--json"], main, data, redis_url))
    assert hit["stale_files"] == [str(app)]
    assert "(changed since: app.py)" in _run(["search", "Edit"], main, data, redis_url)
    assert (
        json.loads(_run(["search", "Edit", "--json", "--fresh-only"], main, data, redis_url)) == []
    )
    shown = json.loads(_run(["show", str(row.id), "--json"], main, data, redis_url))
    assert shown["stale_files"] == [str(app)]
    fresh_only = _context(main, data, redis_url, "--fresh-only")
    assert (fresh_only["observations"], fresh_only["stale_left_out"]) == ([], 2)
    # The SessionStart hook: one stale observation and no fresh one to prefer is shown, marked.
    start = json.loads(_hook({"hook_event_name": "SessionStart", "session_id": "fresh-s2",
                              "cwd": str(main)}, main, data, redis_url))  # fmt: skip
    assert "(changed since: app.py)" in start["hookSpecificOutput"]["additionalContext"]
    store = sqlite_store(settings)
    try:
        full = await mcp_tools.observations_text(
            store, [row.id], max_chars=12000, freshness=Freshness.here(str(main))
        )
        found = await mcp_tools.search_index(
            store, "Edit", filters=mcp_tools.TextFilter(), limit=5, max_chars=12000,
            freshness=Freshness.here(str(main)),
        )  # fmt: skip
    finally:
        await store.aclose()
    assert f"- stale_files: {app}" in full
    assert "(changed since: app.py)" in found

    app.write_text(V1)  # restored: the same content is fresh again
    assert _stale(main, data, redis_url) == []
    # Another checkout of the project compares its own files, by path from its root.
    assert _stale(other, data, redis_url) == []
    (other / "src" / "app.py").write_text("changed only here\n")
    assert _stale(other, data, redis_url) == [str(app)]
    assert _stale(main, data, redis_url) == []

    notes.unlink()  # a deleted file counts as changed
    assert _stale(main, data, redis_url) == [str(notes)]


def _observation(title: str, tag: str, path: str) -> str:
    """An observer's observation that names its one file in `<files_read>` or `<files_modified>`."""
    empty = "files_modified" if tag == "files_read" else "files_read"
    return (
        f"<observation><type>change</type><title>{title}</title><narrative>{title}.</narrative>"
        f"<{tag}><file>{path}</file></{tag}><{empty}></{empty}></observation>"
    )


async def test_only_the_observation_about_a_changed_file_is_marked(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    main, _ = _checkouts(tmp_path)
    data = tmp_path / "data"
    app, notes = _edit_app_and_read_notes(main, data, redis_url)
    # One turn of two calls; the observer names each observation's file (relative, as models do).
    fake_observer.script(Reply(text="\n".join([
        _observation("Login always succeeds", "files_modified", "src/app.py"),
        _observation("Notes list the open work", "files_read", "notes.md"),
    ])))  # fmt: skip
    rows = await _observe(make_settings(data, redis_url, fake_observer.url), arq_redis)
    assert len(fake_observer.requests) == 1
    # Each observation keeps only the evidence it names, and that file's hash.
    assert sorted((r.title, r.files_read, r.files_modified, set(r.file_hashes or {}))
                  for r in rows) == [
        ("Login always succeeds", [], [str(app)], {"src/app.py"}),
        ("Notes list the open work", [str(notes)], [], {"notes.md"}),
    ]  # fmt: skip

    def stale() -> dict[str, list[str]]:
        rows = _context(main, data, redis_url)["observations"]
        return {row["title"]: row["stale_files"] for row in rows}

    assert stale() == {"Login always succeeds": [], "Notes list the open work": []}
    app.write_text(V1 + "# edited later\n")
    assert stale() == {"Login always succeeds": [str(app)], "Notes list the open work": []}
    notes.unlink()
    assert stale() == {
        "Login always succeeds": [str(app)],
        "Notes list the open work": [str(notes)],
    }
