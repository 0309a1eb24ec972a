"""The real Gemini CLI in an AgentStack: its ~/.gemini written from docs/agents/gemini.md, `-p`.

The hooks and the MCP server come from the docs page's ```json blocks, with each command's
literal `memq` made the full path of the console script, so the page cannot drift from what
the tests run. The model is a FakeGemini server (tests/support/agent_models/gemini.py).
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

from tests.support.agent_bins import agent_binary
from tests.support.agent_models.gemini import FakeGemini
from tests.support.agent_stack import AgentStack
from tests.support.ingest import REPO

DOC = REPO / "docs" / "agents" / "gemini.md"
# The settings a test machine needs on top of the documented blocks: an API key login (the
# fake's base URL would otherwise select the `gateway` auth that headless runs refuse), and
# nothing phoning home.
OFFLINE_SETTINGS: dict[str, Any] = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}},
}


def configure_gemini(stack: AgentStack, *, hooks: bool = True) -> None:
    """Write ~/.gemini from the docs' JSON blocks (with the full path of `memq`)."""
    settings = json.loads(json.dumps(OFFLINE_SETTINGS))
    for block in documented_blocks():
        if hooks or "hooks" not in block:
            settings |= with_memq_path(block, stack.memq)
    gemini = stack.home / ".gemini"
    gemini.mkdir(exist_ok=True)
    (gemini / "settings.json").write_text(json.dumps(settings, indent=2))
    (gemini / "trustedFolders.json").write_text(json.dumps({str(stack.project): "TRUST_FOLDER"}))


def documented_blocks() -> list[dict[str, Any]]:
    """The ```json blocks of docs/agents/gemini.md, parsed."""
    blocks = re.findall(r"^```json\n(.*?)^```", DOC.read_text(), re.M | re.S)
    assert len(blocks) == 2, "docs/agents/gemini.md should hold the hooks and the MCP block"
    return [json.loads(b) for b in blocks]


def with_memq_path(value: Any, memq: str) -> Any:
    """`value` with each command `memq …` made the console script's full path."""
    if isinstance(value, dict):
        return {
            k: (re.sub(r"^memq\b", lambda _: memq, v) if k == "command" and isinstance(v, str) else
                with_memq_path(v, memq))
            for k, v in value.items()
        }  # fmt: skip
    if isinstance(value, list):
        return [with_memq_path(v, memq) for v in value]
    return value


def run_gemini(
    stack: AgentStack, fake: FakeGemini, prompt: str, *, resume: bool = False, **env_extra: str
) -> dict[str, Any]:
    """One headless session (`gemini -p`, `--resume latest` to go on with the last one); returns
    its JSON output."""
    env = stack.env(GEMINI_API_KEY="fake-local-key", GOOGLE_GEMINI_BASE_URL=fake.url, **env_extra)
    command = [str(agent_binary("gemini")), "-p", prompt, "--approval-mode", "yolo",
               "--output-format", "json", *(["--resume", "latest"] if resume else [])]  # fmt: skip
    done = subprocess.run(
        command, cwd=stack.project, env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"gemini exited {done.returncode}:\n{done.stderr[-4000:]}"
    output: dict[str, Any] = json.loads(done.stdout)
    return output
