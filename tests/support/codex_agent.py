"""The real Codex CLI in an AgentStack: its ~/.codex written from docs/agents/codex.md, `exec`.

The hooks and the MCP server come from the docs page's ```json and ```toml blocks, with the
literal `memq` made the full path of the console script, so the page cannot drift from what
the tests run. The model is a FakeResponses server (tests/support/agent_models/responses.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from tests.support.agent_bins import agent_binary
from tests.support.agent_stack import AgentStack
from tests.support.ingest import REPO

DOCS = REPO / "docs" / "agents" / "codex.md"
API_KEY = "sk-fake-local"
# `-m gpt-5.5` gives Codex its built-in metadata for that model (apply_patch as a freeform
# tool, MCP tools behind tool_search); the fake ignores the name.
MODEL = "gpt-5.5"


def doc_blocks(language: str) -> list[str]:
    """The docs page's fenced blocks of `language`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", DOCS.read_text(), re.M | re.S)


def write_codex_config(stack: AgentStack, base_url: str) -> Path:
    """CODEX_HOME (`~/.codex`) with the docs' hooks.json and MCP block, the fake provider and
    the project trusted; returns it."""
    codex_home = stack.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (hooks_block,) = doc_blocks("json")
    hooks = json.loads(hooks_block)
    for groups in hooks["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                assert handler["command"].startswith("memq "), handler
                handler["command"] = stack.memq + handler["command"][len("memq") :]
    (codex_home / "hooks.json").write_text(json.dumps(hooks, indent=2))
    (mcp_block,) = doc_blocks("toml")
    mcp_block = mcp_block.replace('command = "memq"', f"command = {json.dumps(stack.memq)}")
    assert tomllib.loads(mcp_block)["mcp_servers"]["memq"]["command"] == stack.memq
    provider = f"""model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "Fake local Responses API"
base_url = "{base_url}"
wire_api = "responses"
env_key = "FAKE_API_KEY"

[projects.{json.dumps(str(stack.project))}]
trust_level = "trusted"

"""
    # A worktree run's memq imports that tree; Codex passes MCP servers a bare environment.
    worktree = stack.env().get("PYTHONPATH")
    extra = f"\n[mcp_servers.memq.env]\nPYTHONPATH = {json.dumps(worktree)}\n" if worktree else ""
    config = provider + mcp_block + extra
    tomllib.loads(config)  # a broken block fails here, not as a Codex start-up error
    (codex_home / "config.toml").write_text(config)
    return codex_home


def codex_exec(
    stack: AgentStack, codex_home: Path, prompt: str, *, bypass_hook_trust: bool = True
) -> list[dict[str, Any]]:
    """One `codex exec --json` session in the project, offline; its JSON events."""
    env = stack.env(FAKE_API_KEY=API_KEY, CODEX_HOME=str(codex_home))
    trust = ["--dangerously-bypass-hook-trust"] if bypass_hook_trust else []
    done = subprocess.run(
        [str(agent_binary("codex")), "exec", "--json", *trust, "-m", MODEL, prompt],
        cwd=stack.project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "turn.completed", done.stdout[-3000:]
    return events
