"""`[mcp_servers.memq]` in Codex's config.toml, edited with tomlkit so the user's comments,
order and formatting stay as they were."""

from __future__ import annotations

from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable, Table
from tomlkit.toml_document import TOMLDocument

from worker.ops.install.hook_entries import ShapeError

_SERVERS = "mcp_servers"
_NAME = "memq"
# Codex starts MCP servers with a bare environment: pass on memq's settings where the user
# sets them in the shell (docs/agents/codex.md).
PASSED_ENV_VARS = ("MEMQ_CONFIG", "MEMQ_DATA_DIR", "MEMQ_DATABASE_URL", "MEMQ_PROJECT")


def put_memq_server(text: str, memq: str) -> str:
    """`text` with `[mcp_servers.memq]` running `<memq> mcp`; the table's other keys stay.

    A new table also passes memq's settings variables on (`env_vars`); an existing one keeps
    the user's choice of them.
    """
    doc = _parse(text)
    servers = doc.get(_SERVERS)
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc[_SERVERS] = servers
    elif not isinstance(servers, Table | InlineTable):
        raise ShapeError(f"`{_SERVERS}` is not a table")
    existing = servers.get(_NAME)
    if isinstance(existing, Table | InlineTable):
        if existing.get("command") == memq and _plain(existing.get("args")) == ["mcp"]:
            return text
        existing["command"] = memq
        existing["args"] = ["mcp"]
    else:
        entry = tomlkit.inline_table() if isinstance(servers, InlineTable) else tomlkit.table()
        entry["command"] = memq
        entry["args"] = ["mcp"]
        entry["env_vars"] = list(PASSED_ENV_VARS)
        if isinstance(entry, Table):
            entry.add(tomlkit.nl())  # a blank line before whatever table follows
        servers[_NAME] = entry
    return tomlkit.dumps(doc).rstrip("\n") + "\n"


def drop_memq_server(text: str) -> str:
    """`text` without `[mcp_servers.memq]`; an `mcp_servers` that held only it goes too."""
    doc = _parse(text)
    servers = doc.get(_SERVERS)
    if not isinstance(servers, Table | InlineTable) or _NAME not in servers:
        return text
    del servers[_NAME]
    if not servers:
        del doc[_SERVERS]
    rest = tomlkit.dumps(doc).rstrip()
    return rest + "\n" if rest else ""


def _parse(text: str) -> TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as e:
        raise ShapeError(f"not valid TOML ({e})") from e


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value
