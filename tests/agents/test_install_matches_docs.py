"""`memq install <agent>` writes exactly the blocks of the agent's docs page (with this memq's
full path): the page the real-agent tests configure from and the command cannot drift apart."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from tests.support.ingest import console_script

DOCS = Path(__file__).resolve().parents[2] / "docs" / "agents"


def _blocks(page: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (DOCS / page).read_text(), re.S)


def _install(home: Path, agent: str) -> None:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    if "PYTHONPATH" in os.environ:  # a worktree run installs that tree's memq
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [console_script(), "install", agent], capture_output=True, text=True, timeout=60,
        env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _with_path(text: str) -> Any:
    memq = console_script()
    text = text.replace('"memq hook', f'"{memq} hook')
    return json.loads(text.replace('"command": "memq"', f'"command": "{memq}"'))


def test_codex(tmp_path: Path) -> None:
    _install(tmp_path, "codex")
    (hooks,) = _blocks("codex.md", "json")
    assert json.loads((tmp_path / ".codex" / "hooks.json").read_text()) == _with_path(hooks)
    (toml,) = _blocks("codex.md", "toml")
    written = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    expected = tomllib.loads(toml.replace('command = "memq"', f'command = "{console_script()}"'))
    assert written["mcp_servers"]["memq"] == expected["mcp_servers"]["memq"]


def test_claude_code(tmp_path: Path) -> None:
    _install(tmp_path, "claude-code")
    hooks, _, mcp = _blocks("claude-code.md", "json")
    assert json.loads((tmp_path / ".claude" / "settings.json").read_text()) == _with_path(hooks)
    assert json.loads((tmp_path / ".claude.json").read_text()) == _with_path(mcp)


def test_gemini(tmp_path: Path) -> None:
    _install(tmp_path, "gemini")
    hooks, mcp = _blocks("gemini.md", "json")
    written = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert written == {**_with_path(hooks), **_with_path(mcp)}


def test_opencode(tmp_path: Path) -> None:
    from worker.ingest.agents.opencode import plugin_source

    _install(tmp_path, "opencode")
    (mcp,) = _blocks("opencode.md", "json")
    config = tmp_path / ".config" / "opencode"
    expected = json.loads(mcp)
    expected["mcp"]["memq"]["command"][0] = console_script()
    assert json.loads((config / "opencode.json").read_text()) == expected
    assert (config / "plugin" / "memq.js").read_text() == plugin_source()
