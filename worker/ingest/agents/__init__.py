"""One module per coding agent: its hook payloads mapped to memq events."""

AGENTS: tuple[str, ...] = ("claude-code", "codex", "gemini", "opencode")
"""Every agent with a `memq hook <agent>` command and a `/hooks/<agent>` route (importing
this costs nothing: the hook's fast path reads it before anything else is loaded)."""
