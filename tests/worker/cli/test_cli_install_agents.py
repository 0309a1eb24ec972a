"""The real agents (pinned by scripts/agents.sh) accept what `memq install` writes, offline.

Each runs a command that reads its settings without a model: the MCP server list, Claude
Code's settings check (`claude doctor`), OpenCode's resolved config.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent_bins import agent_binary
from tests.support.agent_settings import AGENTS, memq, temp_home, write_user_files
from tests.support.ingest import console_script
from worker.connect.managed_redis import ManagedRedis

pytestmark = pytest.mark.slow  # each starts a real agent binary (1-10 s)

_OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


@pytest.fixture(name="bins")
def _fix_bins() -> dict[str, Path]:
    return {agent: agent_binary(agent) for agent in AGENTS}


@pytest.fixture(name="home")
def _fix_home(
    bins: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    # `bins` first: the binaries are found under the real HOME, before this test's replaces it
    home = temp_home(tmp_path, monkeypatch)
    (home / "webapp").mkdir()
    yield home
    # An agent that checks its MCP servers starts `memq mcp`, which starts the data dir's
    # managed Redis; that one outlives its starter by design: stopped here, not leaked.
    ManagedRedis(home / ".local/share/memq").stop()


def run_agent(binary: Path, home: Path, *args: str) -> str:
    """Run the agent's binary in `home` (a clean environment); its stdout and stderr."""
    node_dir = str(Path(shutil.which("node") or "/usr/bin/node").parent)
    env = {
        "HOME": str(home),
        "PATH": f"{Path(console_script()).parent}:{node_dir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        **_OFFLINE,
    }
    done = subprocess.run(
        [str(binary), *args], cwd=home / "webapp", env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_the_console_script_installs_with_its_own_path(home: Path) -> None:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    if "PYTHONPATH" in os.environ:  # a worktree run tests that tree's code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [console_script(), "install", "gemini"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    settings = json.loads((home / ".gemini/settings.json").read_text())
    assert settings["mcpServers"]["memq"]["command"] == console_script()


@pytest.mark.parametrize("http", [False, True])
def test_claude_code_takes_the_settings_and_connects_to_memq_mcp(
    bins: dict[str, Path], home: Path, http: bool
) -> None:
    write_user_files(home, "claude-code")
    assert memq("install", "claude-code", *(["--http"] if http else [])).exit_code == 0
    listed = run_agent(bins["claude-code"], home, "mcp", "list")
    assert f"memq: {console_script()} mcp - ✔ Connected" in listed
    assert "other: other-mcp" in listed
    doctor = run_agent(bins["claude-code"], home, "doctor")
    assert "Invalid settings" not in doctor


def test_codex_lists_memqs_mcp_server(bins: dict[str, Path], home: Path) -> None:
    write_user_files(home, "codex")
    assert memq("install", "codex").exit_code == 0
    rows = [line.split() for line in run_agent(bins["codex"], home, "mcp", "list").splitlines()]
    assert ["memq", console_script(), "mcp"] in [row[:3] for row in rows]
    assert ["other", "other-mcp"] in [row[:2] for row in rows]
    assert "MEMQ_DATA_DIR=" in run_agent(bins["codex"], home, "mcp", "get", "memq")  # env_vars


def test_gemini_validates_the_settings_and_lists_memq(bins: dict[str, Path], home: Path) -> None:
    write_user_files(home, "gemini")
    assert memq("install", "gemini").exit_code == 0
    listed = run_agent(bins["gemini"], home, "mcp", "list")
    assert "Invalid configuration" not in listed
    assert f"memq: {console_script()} mcp (stdio)" in listed
    assert "other: other-mcp" in listed


def test_opencode_loads_the_plugin_and_the_mcp_server(bins: dict[str, Path], home: Path) -> None:
    write_user_files(home, "opencode")
    assert memq("install", "opencode").exit_code == 0
    output = run_agent(bins["opencode"], home, "debug", "config")
    config = json.loads(output[output.index("{") :])
    assert config["mcp"]["memq"] == {
        "type": "local", "command": [console_script(), "mcp"], "enabled": True, "timeout": 20000,
    }  # fmt: skip
    assert "other" in config["mcp"]
    plugins = home / ".config/opencode/plugin"
    assert {f"file://{plugins}/memq.js", f"file://{plugins}/mine.js"} <= set(config["plugin"])
