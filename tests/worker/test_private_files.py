"""Only the owner can read what memq stores: the data dir is 0700, its files 0600."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.claude_mem_db import ClaudeMemDb
from tests.support.ingest import console_script, subprocess_env

HOOK_PAYLOAD = Path(__file__).resolve().parents[1] / "data" / "claude_code" / "post_tool_use.json"
CLOSED = "redis://127.0.0.1:1/0"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def memq(data_dir: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = subprocess_env(data_dir, CLOSED, MEMQ_CHROMA="off", MEMQ_PROJECT="shop")
    return subprocess.run(
        [console_script(), *args], input=stdin, env=env, capture_output=True, timeout=60
    )


@pytest.mark.slow
def test_what_memq_creates_only_its_owner_can_read(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # The hook, with Redis unreachable, spools the event into a new data dir.
    assert memq(data, "hook", "claude-code", stdin=HOOK_PAYLOAD.read_bytes()).returncode == 0
    spooled = [p for p in (data / "spool").iterdir() if p.is_file()]
    assert spooled
    # An import creates the database (with its WAL files).
    original = ClaudeMemDb(tmp_path / "claude-mem.db")
    original.session("cc-1", "sdk-1", "shop", 1_735_700_000_000)
    original.observation("sdk-1", "shop", 1_735_700_001_000, title="Private", narrative="n")
    original.close()
    done = memq(data, "import-claude-mem", str(original.path))
    assert done.returncode == 0, done.stderr

    assert mode(data) == 0o700
    assert mode(data / "spool") == 0o700
    assert {mode(p) for p in spooled} == {0o600}
    database = [p for p in data.iterdir() if p.name.startswith("memq.db")]
    assert data / "memq.db" in database
    assert {p.name: mode(p) for p in database} == {p.name: 0o600 for p in database}


@pytest.mark.slow
def test_a_data_dir_an_older_memq_left_readable_is_closed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = memq(data, "sessions")  # opens (creates) the database
    assert done.returncode == 0, done.stderr
    data.chmod(0o755)
    (data / "memq.db").chmod(0o644)
    assert memq(data, "sessions").returncode == 0
    assert (mode(data), mode(data / "memq.db")) == (0o700, 0o600)
