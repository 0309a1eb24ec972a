"""The claude-code observer's CLI runs load nothing of the user's Claude Code: memq's own hooks
installed in ~/.claude/settings.json, an MCP server in ~/.claude.json and CLAUDE.md files are
all there, the same bundled CLI run plainly fires and reads them, the observer's runs do not."""

from __future__ import annotations

import json
import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.fake_observer import FakeObserver, Reply
from worker.observers.claude_code import ClaudeCodeObserver
from worker.observers.claude_code_cli import bundled_cli
from worker.observers.protocol import ObserverRequest

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[3] / "docs" / "agents" / "claude-code.md"
CANARY = "CANARY-7f3a-from-a-claude-md"


class Planted:
    """A HOME holding memq's hooks (each writing a marker), an MCP server and CLAUDE.md files."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.data = root / "data"
        self.markers = root / "markers"
        for d in (self.home / ".claude", self.data, self.markers):
            d.mkdir(parents=True)
        hooks = re.findall(r"```json\n(.*?)```", DOC.read_text(), re.S)[0]
        # memq's own command hooks, as `memq install` writes them, each now leaving a marker
        marked = re.sub(
            r'"memq hook claude-code"',
            lambda _: json.dumps(f"echo hook >> {self.markers}/hooks"),
            hooks,
        )
        (self.home / ".claude" / "settings.json").write_text(marked)
        server = root / "mcp-server"
        server.write_text(f"#!/bin/sh\necho started >> {self.markers}/mcp\nsleep 5\n")
        server.chmod(server.stat().st_mode | stat.S_IXUSR)
        mcp = {"memq": {"type": "stdio", "command": str(server), "args": []}}
        (self.home / ".claude.json").write_text(
            json.dumps({"mcpServers": mcp, "hasCompletedOnboarding": True})
        )
        (self.home / ".claude" / "CLAUDE.md").write_text(f"Always say {CANARY}.\n")
        (self.data / "CLAUDE.md").write_text(f"Project rule: {CANARY}.\n")

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def transcripts(self) -> list[Path]:
        return list((self.home / ".claude").glob("projects/**/*.jsonl"))

    def env(self, fake: FakeObserver) -> dict[str, str]:
        return {"HOME": str(self.home), "PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "test-key",
                "ANTHROPIC_BASE_URL": fake.url,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip


def _sent_text(fake: FakeObserver) -> str:
    return "\n".join(json.dumps(r.body) for r in fake.requests)


@pytest.fixture(name="planted")
def _fix_planted(tmp_path: Path) -> Planted:
    return Planted(tmp_path)


def test_the_planted_hooks_mcp_and_claude_md_work_on_a_plain_cli_run(
    planted: Planted, fake_observer: FakeObserver
) -> None:
    # The control: without memq's options the same CLI fires memq's hooks, starts the MCP
    # server, reads both CLAUDE.md files and saves a transcript `claude --resume` would list.
    fake_observer.responder = lambda _: Reply(text="hello")
    cli = bundled_cli()
    assert cli is not None
    done = subprocess.run(
        [cli, "-p", "hi", "--output-format", "json"], cwd=planted.data,
        env=planted.env(fake_observer), capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert planted.fired() == ["hooks", "mcp"]
    assert CANARY in _sent_text(fake_observer)
    assert planted.transcripts()


async def test_observer_calls_fire_no_hook_and_load_nothing_of_the_user(
    planted: Planted, fake_observer: FakeObserver
) -> None:
    observer = ClaudeCodeObserver(
        model="claude-haiku-4-5", cli=bundled_cli(), data_dir=planted.data, max_tokens=512,
        timeout_s=30.0, warm=1, environ=planted.env(fake_observer),
    )  # fmt: skip
    try:
        for n in range(2):  # a cold process and a warm one
            fake_observer.script(Reply(text=f"<observation>{n}</observation>"))
            request = ObserverRequest(system="memq system prompt", history=[], user=f"turn {n}")
            reply = await observer.complete(request)
            assert reply.text == f"<observation>{n}</observation>"
    finally:
        await observer.aclose()

    assert planted.fired() == []  # no hook ran, no MCP server started
    sent = _sent_text(fake_observer)
    assert CANARY not in sent  # neither CLAUDE.md was read
    assert planted.transcripts() == []  # nothing for `claude --resume` to list
    for request in fake_observer.requests:
        assert not request.body.get("tools")
        assert request.system.endswith("memq system prompt")
        # the run's working directory is memq's own, not a project of the user's
        assert f"Primary working directory: {planted.data / 'claude-code'}" in request.user
