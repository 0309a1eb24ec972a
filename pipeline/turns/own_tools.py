"""memq's own tools, seen from the agent: their calls are never shown to the observer.

An agent that uses `memq mcp` reports each of its calls as a tool call like any other; its
output is memq's own notes, and observing it would store memories of memories, a loop that
grows with use. Each agent names an MCP tool after the server the user configured.
"""

from __future__ import annotations

from collections.abc import Sequence

OWN_TOOL_REASON = "memq's own MCP tool: its answer is memq's notes, never observed again"


def is_own_tool(tool_name: str, servers: Sequence[str]) -> bool:
    """Whether `tool_name` is a tool of one of memq's MCP `servers` (as the agents name them).

    Claude Code and Codex: `mcp__<server>__<tool>`; Gemini CLI: `mcp_<server>_<tool>`;
    OpenCode: `<server>_<tool>`.
    """
    name = tool_name.lower()
    for server in servers:
        s = server.lower()
        if name.startswith((f"mcp__{s}__", f"mcp_{s}_", f"{s}_")):
            return True
    return False
