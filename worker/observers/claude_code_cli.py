"""The Claude Code CLI as memq runs it: isolated options, its location, and the login check.

Every observer run loads none of the user's settings, hooks, CLAUDE.md files, plugins, skills
or MCP servers, offers no tools, saves no transcript (`claude --resume` never lists it) and
runs in a directory of memq's own, so memq's hooks can never fire inside an observer call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions

LOGIN_CHECK_TIMEOUT_S = 15.0

# Set for every observer run; the worker's environment (ANTHROPIC_API_KEY, Bedrock, Vertex,
# gateway variables) passes through beneath them.
_RUN_ENV = {
    "CLAUDE_CODE_MAX_RETRIES": "0",  # the job retries, not the CLI
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, update checks, prefetches
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "DISABLE_AUTOUPDATER": "1",
}
# What the user's settings may hold for authentication alone (a gateway's key helper, Bedrock
# or Vertex switches in `env`): passed on through --settings, nothing else of that file.
_AUTH_SETTINGS = ("apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "gcpAuthRefresh")
_AUTH_ENV_PREFIXES = ("ANTHROPIC_", "AWS_", "CLAUDE_CODE_USE_", "CLOUD_ML_", "VERTEX_",
                      "GOOGLE_", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")  # fmt: skip


class LoginStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What `claude auth status --json` reports (the fields memq reads)."""

    logged_in: bool = False
    auth_method: str = "none"
    api_provider: str = ""


def bundled_cli() -> str | None:
    """The `claude` executable claude-agent-sdk bundles, or None when it is not installed."""
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return str(path) if path.is_file() else None


def cli_path(configured: str | None) -> str | None:
    """MEMQ_CLAUDE_CODE_CLI when set, else the bundled CLI."""
    return str(Path(configured).expanduser()) if configured else bundled_cli()


def observer_dir(data_dir: Path) -> Path:
    """The observer runs' working directory: memq's own, empty, never a project's."""
    path = data_dir / "claude-code"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def auth_settings(home: Path) -> str | None:
    """The authentication part of the user's ~/.claude/settings.json as inline JSON, or None."""
    try:
        raw = json.loads((home / ".claude" / "settings.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    kept: dict[str, object] = {k: raw[k] for k in _AUTH_SETTINGS if isinstance(raw.get(k), str)}
    env = raw.get("env")
    if isinstance(env, dict):
        auth_env = {k: str(v) for k, v in env.items() if k.startswith(_AUTH_ENV_PREFIXES)}
        if auth_env:
            kept["env"] = auth_env
    return json.dumps(kept) if kept else None


def isolated_options(
    *,
    system: str,
    model: str,
    cli: str | None,
    cwd: Path,
    max_tokens: int,
    environ: Mapping[str, str],
    stderr: Callable[[str], None],
    max_buffer_size: int | None = None,
) -> ClaudeAgentOptions:
    """The options of one observer CLI process: memq's system prompt, no tools, no user state."""
    from claude_agent_sdk import ClaudeAgentOptions

    home = Path(environ.get("HOME") or Path.home())
    return ClaudeAgentOptions(
        system_prompt=system,
        model=model,
        cli_path=cli,
        cwd=str(cwd),
        tools=[],  # no built-in tools at all
        setting_sources=[],  # no user, project or local settings: no hooks, CLAUDE.md, plugins
        settings=auth_settings(home),
        mcp_servers={},
        strict_mcp_config=True,  # no MCP server from any config
        skills=[],
        plugins=[],
        thinking={"type": "disabled"},
        env={**environ, **_RUN_ENV, "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_tokens)},
        # No transcript under ~/.claude/projects: nothing for `claude --resume` to list.
        extra_args={"no-session-persistence": None},
        stderr=stderr,
        max_buffer_size=max_buffer_size,
    )


async def login_status(cli: str, environ: Mapping[str, str]) -> LoginStatus | None:
    """`claude auth status --json` of `cli`, or None when it cannot run or answers nonsense."""
    try:
        proc = await asyncio.create_subprocess_exec(
            cli, "auth", "status", "--json",
            env=dict(environ),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), LOGIN_CHECK_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    try:
        return msgspec.json.decode(out, type=LoginStatus)
    except msgspec.DecodeError:
        return None
