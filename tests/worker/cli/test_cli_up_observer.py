"""`memq up` with no observer configured asks Claude Code (`claude auth status --json` of the
bundled CLI) and starts with claude-code when its login is usable, else refuses in one line.

A login is simulated by what the real CLI reports, never a real account: the test HOME's
~/.claude/settings.json names a key helper and a base URL (the fake Anthropic server), as a
gateway user's settings do.
"""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.fake_observer import FakeObserver
from tests.support.ingest import console_script, subprocess_env
from tests.support.ports import free_port

pytestmark = pytest.mark.slow
POST_TOOL_USE = Path(__file__).resolve().parents[2] / "data" / "claude_code" / "post_tool_use.json"


def _env(home: Path, redis_url: str, **extra: str) -> dict[str, str]:
    return subprocess_env(
        home, redis_url, MEMQ_UI_PORT=str(free_port()), MEMQ_AGENT_PORT=str(free_port()),
        MEMQ_CHROMA="off", MEMQ_BATCH_WAIT_MS="0", MEMQ_BATCH_MAX_WAIT_S="0", **extra,
    )  # fmt: skip


def test_up_without_a_login_refuses_naming_the_three_ways(tmp_path: Path, redis_url: str) -> None:
    done = subprocess.run(
        [console_script(), "up"], env=_env(tmp_path, redis_url), cwd=tmp_path,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "log in to Claude Code" in line
    assert "ANTHROPIC_API_KEY" in line
    assert "OPENAI_BASE_URL" in line


def test_up_refuses_when_the_cli_cannot_say(tmp_path: Path, redis_url: str) -> None:
    broken = tmp_path / "claude"
    broken.write_text("#!/bin/sh\necho 'not json'\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    env = _env(tmp_path, redis_url, MEMQ_CLAUDE_CODE_CLI=str(broken))
    done = subprocess.run(
        [console_script(), "up"], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "log in to Claude Code" in done.stderr


def test_up_with_a_usable_login_starts_with_claude_code_and_stores(
    tmp_path: Path, redis_url: str, fake_observer: FakeObserver
) -> None:
    home = tmp_path
    (home / ".claude").mkdir()
    settings = {"apiKeyHelper": "echo test-key", "env": {"ANTHROPIC_BASE_URL": fake_observer.url}}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    env = _env(home, redis_url)
    port = env["MEMQ_AGENT_PORT"]
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [console_script(), "up"], env=env, cwd=home, stdout=out, stderr=out,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _post_hook(int(port), POST_TOOL_USE.read_bytes())
            (request,) = fake_observer.wait_for_requests(1, timeout_s=30)
            assert request.body["stream"] is True  # the Claude Code CLI, not the HTTP adapter
            assert request.headers.get("x-api-key") == "test-key"  # from the key helper
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
    lines = log.read_text().splitlines()
    chosen = [line for line in lines if "the observer is claude-code" in line]
    assert chosen == [
        "memq: no observer configured; Claude Code is logged in (api key helper), so the "
        "observer is claude-code (set MEMQ_OBSERVER to choose another)"
    ]
    assert code == 0


def _post_hook(port: int, body: bytes, timeout_s: float = 30.0) -> None:
    import urllib.error
    import urllib.request

    url = f"http://127.0.0.1:{port}/hooks/claude-code"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=5) as r:
                assert r.status == 200
                return
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
