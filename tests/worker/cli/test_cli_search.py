"""`memq search|show|timeline|context|reindex|import-claude-mem` and the SessionStart hook."""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.turns.content_hash import compute_observation_content_hash
from tests.support.chroma_down import closed_port_url
from tests.support.claude_mem_db import ClaudeMemDb
from worker.cli.app import app
from worker.ingest.hook import run_hook
from worker.storage.records import BatchWrite, ObservationRow, PromptRow, SummaryRow
from worker.storage.sqlite.store import SqliteStore

RUNNER = CliRunner()
T0 = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
HIT_FIELDS = {
    "id", "kind", "type", "title", "subtitle", "project", "memory_session_id", "created_at",
    "score", "snippet", "stale_files",
}  # fmt: skip


def obs(title: str, narrative: str, type: str = "bugfix") -> ObservationRow:
    return ObservationRow(
        memory_session_id="s1",
        project="shop",
        type=type,
        title=title,
        subtitle=f"about {title.lower()}",
        facts=[f"{title} fact"],
        narrative=narrative,
        concepts=["gotcha"],
        files_read=[],
        files_modified=["app.py"],
        prompt_number=1,
        content_hash=compute_observation_content_hash("s1", title, narrative),
        created_at=T0,
    )


async def _seed(path: Path) -> None:
    store = SqliteStore(path)
    await store.write_batch(
        BatchWrite(
            memory_session_id="s1",
            project="shop",
            fence=1,
            event_ids=["e1"],
            prompts=[
                PromptRow(
                    memory_session_id="s1",
                    project="shop",
                    prompt_number=1,
                    prompt_text="fix the login test",
                    created_at=T0,
                    event_id="e1",
                )
            ],
            observations=[
                obs("Login test fixed", "The session cookie expired before the assertion."),
                obs("Cache TTL found", "Product pages are cached for 300 seconds.", "discovery"),
            ],
            summaries=[
                SummaryRow(
                    memory_session_id="s1",
                    project="shop",
                    request="Fix the login test",
                    investigated="cookies",
                    learned="Secure cookies need https",
                    completed="The test passes",
                    next_steps="Check signup",
                    notes=None,
                    prompt_number=1,
                    created_at=T0,
                )
            ],
        )
    )
    await store.aclose()


@pytest.fixture(name="data_dir")
def _fix_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("MEMQ_"):
            monkeypatch.delenv(name)
    data = tmp_path / "data"
    monkeypatch.setenv("MEMQ_DATA_DIR", str(data))
    monkeypatch.setenv("MEMQ_EMBEDDING", "tests.support.embeddings:make_hash_embedding")
    asyncio.run(_seed(data / "memq.db"))
    return data


def memq(*args: str) -> tuple[int, str, str]:
    result = RUNNER.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_search_before_any_indexing_is_keyword_only_and_says_so(data_dir: Path) -> None:
    code, out, err = memq("search", "login assertion", "--json")
    assert code == 0, err
    hits = json.loads(out)
    assert [h["title"] for h in hits] == ["Login test fixed"]
    assert set(hits[0]) == HIT_FIELDS
    assert err.strip() == (
        "memq: note: keyword search only: vector index not built yet:"
        " start a worker or run `memq reindex`"
    )
    assert not (data_dir / "chroma").exists()  # searching does not create the index


def test_reindex_then_hybrid_search_and_reindex_again_is_idempotent(data_dir: Path) -> None:
    code, out, err = memq("reindex")
    assert code == 0, err
    assert out.strip().startswith("indexed 3 rows of every project into embedded Chroma")
    code, out, err = memq("search", "cookie", "--json")
    assert (code, err) == (0, "")
    kinds = [(h["kind"], h["title"]) for h in json.loads(out)]
    assert ("observation", "Login test fixed") in kinds
    assert ("summary", "Fix the login test") in kinds
    assert memq("reindex", "--project", "shop")[0] == 0
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(
        path=str(data_dir / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    (collection,) = client.list_collections()
    # 2 observations x (title, narrative, one fact, files) + 5 non-empty summary fields, once each.
    assert collection.count() == 2 * 4 + 5


def test_search_text_output_shows_the_row(data_dir: Path) -> None:
    code, out, _ = memq("search", "cached", "--mode", "fts")
    assert code == 0
    lines = out.splitlines()
    assert "discovery" in lines[0]
    assert "Cache TTL found — about cache ttl found" in lines[0]
    assert "[shop] s1 2026-11-02T09:30" in lines[1]
    assert "[Cache] TTL found" in lines[1]  # stemmed: "cached" matches "Cache"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["search", "?!"], "nothing to search for"),
        (["search", "login\x00x"], "the query contains a NUL character"),
        (["search", "login\x00x", "--mode", "vector"], "the query contains a NUL character"),
        (["search", "login", "--since", "last week"], "--since 'last week'"),
        (["search", "login", "--mode", "fuzzy"], "--mode fuzzy"),
        (["show", "12x"], "is not an id"),
        (["show", "999"], "no observation with id 999"),
        (["show", "summary:7"], "no summary with id 7"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(data_dir: Path, args: list[str], fragment: str) -> None:
    code, _, err = memq(*args)
    assert code == 2
    assert fragment in err
    assert len(err.strip().splitlines()) == 1


def test_search_filters_by_type_and_date(data_dir: Path) -> None:
    _, out, _ = memq("search", "test", "--type", "summary", "--json", "--mode", "fts")
    assert [h["kind"] for h in json.loads(out)] == ["summary"]
    _, out, _ = memq("search", "login", "--since", "2026-11-03", "--json", "--mode", "fts")
    assert json.loads(out) == []


def test_show_prints_every_field(data_dir: Path) -> None:
    code, out, _ = memq("show", "1", "--json")
    assert code == 0
    row = json.loads(out)
    assert (row["kind"], row["id"], row["title"], row["facts"]) == (
        "observation", 1, "Login test fixed", ["Login test fixed fact"],
    )  # fmt: skip
    code, out, _ = memq("show", "summary:1")
    assert code == 0
    assert "learned: Secure cookies need https" in out


def test_timeline_lists_prompts_observations_and_summaries_in_order(data_dir: Path) -> None:
    code, out, _ = memq("timeline", "--session", "s1", "--json")
    assert code == 0
    assert [e["kind"] for e in json.loads(out)] == [
        "prompt",
        "observation",
        "observation",
        "summary",
    ]
    _, text, _ = memq("timeline", "--session", "s1")
    assert text.splitlines()[0] == "2026-11-02 09:30:00 prompt #1: fix the login test"


def test_context_is_markdown_within_the_budget(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = memq("context", "--project", "shop", "--json")
    assert code == 0
    ctx = json.loads(out)
    assert set(ctx) == {"project", "summary", "observations", "markdown", "stale_left_out"}
    assert ctx["summary"]["request"] == "Fix the login test"
    assert "**Next steps:** Check signup" in ctx["markdown"]
    assert [o["title"] for o in ctx["observations"]] == ["Cache TTL found", "Login test fixed"]
    monkeypatch.setenv("MEMQ_CONTEXT_CHARS", "500")
    _, short, _ = memq("context", "--project", "shop")
    assert 0 < len(short) <= 500
    code, out, err = memq("context", "--project", "nothing-here")
    assert (code, out) == (0, "")
    assert "nothing stored for project nothing-here" in err


def test_reindex_needs_a_vector_index(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMQ_CHROMA", "off")
    code, _, err = memq("reindex")
    assert code == 2
    assert "MEMQ_CHROMA=off" in err
    _, _, err = memq("search", "login")
    assert "keyword search only: vector index off (MEMQ_CHROMA=off)" in err


def test_reindex_against_a_dead_server_fails_resumably(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMQ_CHROMA", closed_port_url())
    code, _, err = memq("reindex")
    assert code == 1
    assert "run `memq reindex` again to resume" in err
    assert len(err.strip().splitlines()) == 1
    monkeypatch.setenv("MEMQ_CHROMA", "on")
    code, out, err = memq("reindex")
    assert code == 0, err
    assert "indexed 3 rows" in out


def test_import_claude_mem_reports_counts_and_refuses_unknown_files(
    data_dir: Path, tmp_path: Path
) -> None:
    original = ClaudeMemDb(tmp_path / "claude-mem.db")
    original.session("cc-9", "sdk-9", "shop", 1_735_700_000_000)
    original.observation("sdk-9", "shop", 1_735_700_001_000, title="Imported", narrative="From v1.")
    code, out, err = memq("import-claude-mem", str(original.path), "--json")
    assert code == 0, err
    assert json.loads(out)["observations"] == 1
    original.execute("DROP TABLE session_summaries")
    original.close()
    code, _, err = memq("import-claude-mem", str(original.path))
    assert code == 2
    assert "has no table session_summaries" in err


@pytest.fixture(name="hook_env")
def _fix_hook_env(data_dir: Path) -> dict[str, str]:
    return {
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_PROJECT": "shop",
        "MEMQ_REDIS_URL": "redis://127.0.0.1:1/0",  # never reached: SessionStart publishes nothing
    }


def session_start(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[str, float]:
    payload = {"session_id": "new", "cwd": "/tmp", "hook_event_name": "SessionStart"}
    started = time.monotonic()
    code = run_hook("claude-code", io.BytesIO(json.dumps(payload).encode()), env, started=started)
    assert code == 0
    return capsys.readouterr().out, time.monotonic() - started


def test_session_start_hook_prints_the_context_for_claude_code(
    hook_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    out, elapsed = session_start(hook_env, capsys)
    output = json.loads(out)["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    assert output["additionalContext"].startswith("<memq-notes>\nNotes memq derived from")
    assert "# memq: what happened recently in shop\n" in output["additionalContext"]
    assert "Login test fixed" in output["additionalContext"]
    assert elapsed < 1.0


@pytest.mark.parametrize("storage", ["missing", "corrupt"])
def test_session_start_hook_prints_nothing_when_storage_is_unusable(
    hook_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, storage: str
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    if storage == "corrupt":
        (broken / "memq.db").write_bytes(b"garbage" * 1000)
    out, elapsed = session_start({**hook_env, "MEMQ_DATA_DIR": str(broken)}, capsys)
    assert out == ""
    assert elapsed < 1.0
    assert (broken / "memq.db").exists() == (storage == "corrupt")
