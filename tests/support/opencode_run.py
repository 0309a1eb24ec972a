"""The real OpenCode in an AgentStack's HOME: configured from docs/agents/opencode.md, run offline.

The config is the docs' JSON block (its `memq` command made the console script's full path)
plus the fake model provider and allow-all permissions. OpenCode starts with the plugin
folder and never reaches the npm registry: the registry is a closed loopback port, and the
docs' offline step (a node_modules folder and a lock file that lists @opencode-ai/plugin)
makes OpenCode skip its install.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.agent_bins import agent_binary
from tests.support.agent_stack import AgentStack
from tests.support.ingest import REPO
from tests.support.ports import free_port
from worker.ingest.agents.opencode import plugin_source

DOCS = REPO / "docs" / "agents" / "opencode.md"
OPENCODE_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}
INSTALL_FAILED = "background dependency install failed"


def docs_block(kind: str) -> str:
    """The first ```<kind> block of docs/agents/opencode.md."""
    found = re.search(rf"```{kind}\n(.*?)```", DOCS.read_text(), re.S)
    assert found, f"{DOCS} has no ```{kind} block"
    return found[1]


def docs_config(memq: str) -> dict[str, Any]:
    """The docs' opencode.json block, each `memq` command word made `memq` (a full path)."""
    config: dict[str, Any] = json.loads(docs_block("json"))
    for server in config.get("mcp", {}).values():
        server["command"] = [memq if word == "memq" else word for word in server["command"]]
    return config


def configure_opencode(stack: AgentStack, model_url: str) -> Path:
    """Install the plugin, the offline lock and opencode.json in the stack's HOME; its dir."""
    if shutil.which("rg", path=stack.env()["PATH"]) is None:
        # OpenCode's grep and glob tools would download it (and fail offline).
        pytest.fail("ripgrep (rg) is not on the PATH: scripts/agents.sh installs Debian's")
    config_dir = stack.home / ".config" / "opencode"
    # The docs' shell steps as written: the plugin copy (with memq's Python), the offline step.
    env = {"HOME": str(stack.home), "PATH": f"{Path(stack.memq).parent}:/usr/bin:/bin"}
    if "PYTHONPATH" in stack.env():
        env["PYTHONPATH"] = stack.env()["PYTHONPATH"]
    for step in re.findall(r"```sh\n(.*?)```", DOCS.read_text(), re.S):
        subprocess.run(["bash", "-euc", step], env=env, check=True, timeout=60)
    assert (config_dir / "plugin" / "memq.js").read_text() == plugin_source()
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Fake Chat Completions",
        "options": {"baseURL": model_url, "apiKey": "sk-fake-local"},
        "models": {
            "fake-model": {
                "name": "Fake model", "tool_call": True,
                "limit": {"context": 128000, "output": 4096},
            }
        },
    }  # fmt: skip
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"*": "allow", "webfetch": "deny"},
        "provider": {"fake": provider},
        **docs_config(stack.memq),
    }
    (config_dir / "opencode.json").write_text(json.dumps(config, indent=2))
    return config_dir


def run_opencode(
    stack: AgentStack, prompt: str, agent_url: str, timeout_s: float = 150, **extra: str
) -> subprocess.CompletedProcess[str]:
    """`opencode run <prompt>` in the project, the npm registry a closed port."""
    env = stack.env(
        **OPENCODE_ENV,
        MEMQ_AGENT_URL=agent_url,
        npm_config_registry=f"http://127.0.0.1:{free_port()}/",
        npm_config_fetch_retries="0",
        **extra,
    )
    return subprocess.run(
        [str(agent_binary("opencode")), "run", prompt], cwd=stack.project, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip


def opencode_log(stack: AgentStack) -> str:
    """Every log file OpenCode wrote in the stack's HOME, joined."""
    logs = sorted((stack.home / ".local" / "share" / "opencode" / "log").glob("*.log"))
    return "\n".join(path.read_text(errors="replace") for path in logs)


@contextmanager
def redis_commands(url: str) -> Iterator[list[str]]:
    """Every command Redis runs meanwhile (MONITOR's lines): what reached Redis at all."""
    client = redis.Redis.from_url(url)
    monitor = client.monitor().__enter__()  # MONITOR sent and acknowledged
    seen: list[str] = []

    def listen() -> None:
        try:
            while True:
                line = monitor.connection.read_response()
                seen.append(line.decode(errors="replace") if isinstance(line, bytes) else str(line))
        except (redis.RedisError, OSError, ValueError, AttributeError):
            return  # disconnected on the way out

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        monitor.connection.disconnect()
        thread.join(5)
        client.close()
