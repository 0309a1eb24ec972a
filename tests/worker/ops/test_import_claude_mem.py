"""`memq import-claude-mem`: the original's rows mapped into memq, once, with clear refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite
import pytest

from pipeline.turns.content_hash import compute_observation_content_hash
from tests.support.claude_mem_db import ClaudeMemDb
from worker.ops.import_claude_mem import ImportCounts, UnknownDatabaseError, import_claude_mem
from worker.search.hybrid import search
from worker.storage.sqlite.store import SqliteStore

T1 = 1_735_700_000_000  # 2025-01-01T02:53:20Z in the original's epoch milliseconds


@pytest.fixture(name="original")
def _fix_original(tmp_path: Path) -> Iterator[ClaudeMemDb]:
    db = ClaudeMemDb(tmp_path / "claude-mem.db")
    db.session("cc-1", "sdk-1", "shop", T1)
    db.observation(
        "sdk-1",
        "shop",
        T1 + 1000,
        type="bugfix",
        title="Login test fixed",
        subtitle="cookie flag",
        narrative="Secure cookies never reached the http test client.",
        facts=["SESSION_COOKIE_SECURE off in tests"],
        concepts=["gotcha"],
        files_read=["tests/settings.py"],
        files_modified=["tests/settings.py"],
        prompt_number=2,
        generated_by_model="claude-haiku",
    )
    # The same title and narrative again (databases older than the unique index hold these).
    db.observation(
        "sdk-1",
        "shop",
        T1 + 2000,
        title="Login test fixed",
        narrative="Secure cookies never reached the http test client.",
    )
    db.observation("sdk-1", "shop", T1 + 3000, text="legacy text only", prompt_number=0)
    db.summary(
        "sdk-1", "shop", T1 + 4000, request="Fix the login test", completed="done", prompt_number=2
    )
    db.prompt("cc-1", 1, "why does login fail?", T1)
    db.prompt("cc-1", 2, "fix it", T1 + 500)
    # Observations whose session row is missing still get imported, under their own id.
    db.observation("sdk-orphan", "blog", T1 + 5000, title="Orphan", narrative="No session row.")
    yield db
    db.close()


@pytest.fixture(name="store")
async def _fix_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "memq" / "memq.db")
    yield store
    await store.aclose()


async def test_sessions_rows_and_prompts_are_mapped(
    original: ClaudeMemDb, store: SqliteStore
) -> None:
    seen: list[tuple[int, int]] = []
    counts = await import_claude_mem(
        store, original.path, progress=lambda d, t: seen.append((d, t))
    )
    assert counts == ImportCounts(
        sessions=2, observations=3, duplicates=1, summaries=1, prompts=2, already_imported=0
    )
    assert seen == [(1, 2), (2, 2)]

    timeline = await store.timeline("cc-1")  # Claude Code's session id is memq's session id
    assert [e.kind for e in timeline] == [
        "prompt", "prompt", "observation", "observation", "summary",
    ]  # fmt: skip
    assert [e.prompt_text for e in timeline[:2]] == ["why does login fail?", "fix it"]
    fixed, legacy, summary = (e.row for e in timeline[2:])
    assert fixed is not None
    assert legacy is not None
    assert summary is not None
    assert (fixed.type, fixed.title, fixed.subtitle, fixed.prompt_number) == (
        "bugfix", "Login test fixed", "cookie flag", 2,
    )  # fmt: skip
    assert fixed.facts == ["SESSION_COOKIE_SECURE off in tests"]
    assert (fixed.concepts, fixed.files_read) == (["gotcha"], ["tests/settings.py"])
    assert fixed.created_at == "2025-01-01T02:53:21.000Z"
    assert (legacy.narrative, legacy.prompt_number, legacy.type) == (
        "legacy text only", None, "discovery",
    )  # fmt: skip
    assert (summary.request, summary.completed, summary.project) == (
        "Fix the login test",
        "done",
        "shop",
    )

    (orphan,) = await store.observations(memory_session_id="sdk-orphan")
    assert (orphan.project, orphan.title) == ("blog", "Orphan")
    sessions = {s.memory_session_id: s for s in await store.sessions()}
    assert sessions["cc-1"].last_activity_at.startswith("2025-01-01T02:53:2")


async def test_content_hashes_are_recomputed_for_memq_session_ids(
    original: ClaudeMemDb, store: SqliteStore
) -> None:
    await import_claude_mem(store, original.path)
    expected = compute_observation_content_hash(
        "cc-1", "Login test fixed", "Secure cookies never reached the http test client."
    )
    async with aiosqlite.connect(store.path) as conn:
        hashes = [
            r[0] for r in await conn.execute_fetchall("SELECT content_hash FROM observations")
        ]
    assert expected in hashes
    assert "0123456789abcdef" not in hashes


async def test_a_second_import_skips_everything_already_there(
    original: ClaudeMemDb, store: SqliteStore
) -> None:
    await import_claude_mem(store, original.path)
    before = await store.counts()
    original.prompt("cc-1", 3, "one more thing", T1 + 9000)
    again = await import_claude_mem(store, original.path)
    assert again == ImportCounts(sessions=1, prompts=1, already_imported=7)
    after = await store.counts()
    assert (after.observations, after.summaries, after.prompts) == (
        before.observations, before.summaries, before.prompts + 1,
    )  # fmt: skip


async def test_imported_rows_are_searchable_and_queued_for_vectors(
    original: ClaudeMemDb, store: SqliteStore
) -> None:
    await import_claude_mem(store, original.path)
    result = await search(store, "secure cookies", mode="fts")
    assert [h.title for h in result.hits] == ["Login test fixed"]
    assert await store.vector_lag() == 4  # three observations and one summary


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("DROP TABLE user_prompts", r"has no table user_prompts: not a claude-mem database"),
        (
            "ALTER TABLE observations DROP COLUMN narrative",
            r"table observations has no column narrative",
        ),
        (
            "ALTER TABLE sdk_sessions DROP COLUMN content_session_id",
            r"sdk_sessions has no column content_session_id",
        ),
    ],
)
async def test_a_database_it_does_not_understand_names_what_is_missing(
    original: ClaudeMemDb, store: SqliteStore, damage: str, message: str
) -> None:
    original.execute(damage)
    with pytest.raises(UnknownDatabaseError, match=message) as info:
        await import_claude_mem(store, original.path)
    assert "\n" not in str(info.value)
    assert (await store.counts()).observations == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"this is not sqlite at all" * 100, "is not a SQLite database"), (None, "does not exist")],
)
async def test_a_file_that_is_not_a_database_is_refused(
    tmp_path: Path, store: SqliteStore, content: bytes | None, message: str
) -> None:
    path = tmp_path / "claude-mem.db"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UnknownDatabaseError, match=message):
        await import_claude_mem(store, path)


def test_epoch_seconds_of_very_old_rows_are_read_as_seconds() -> None:
    from worker.ops.import_claude_mem import _at

    assert _at({"created_at_epoch": 1_700_000_000}) == datetime(
        2023, 11, 14, 22, 13, 20, tzinfo=UTC
    )
    assert _at({"created_at_epoch": 1_700_000_000_000}) == datetime(
        2023, 11, 14, 22, 13, 20, tzinfo=UTC
    )


async def test_imported_text_is_redacted_and_stripped_as_the_producer_would(
    tmp_path: Path, store: SqliteStore
) -> None:
    token = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
    db = ClaudeMemDb(tmp_path / "claude-mem.db")
    db.session("cc-9", "sdk-9", "shop", T1)
    db.observation(
        "sdk-9",
        "shop",
        T1 + 1000,
        title="Deploy key rotated",
        narrative=f"The CI used {token} <private>staging host 10.0.0.7</private>until now.",
        facts=["DB_PASSWORD=Zx9vQ2rT7kLm in .env"],
    )
    db.summary("sdk-9", "shop", T1 + 2000, request=f"rotate {token}", completed="done")
    db.prompt("cc-9", 1, f"push with {token}<private> and my notes</private>", T1)
    db.prompt("cc-9", 2, "<private>only private</private>", T1 + 10)
    db.close()

    counts = await import_claude_mem(store, db.path)
    assert (counts.observations, counts.summaries, counts.prompts) == (1, 1, 1)
    timeline = await store.timeline("cc-9")
    prompt, observation, summary = timeline
    assert prompt.prompt_text == "push with [REDACTED:github-token]"
    assert observation.row is not None
    assert observation.row.narrative == "The CI used [REDACTED:github-token] until now."
    assert observation.row.facts == ["DB_PASSWORD=[REDACTED:password-assignment] in .env"]
    assert summary.row is not None
    assert summary.row.request == "rotate [REDACTED:github-token]"
