"""Claude Code's `tool_response` objects, trimmed to what the observer needs.

The agent reports more than happened: an Edit carries the whole file before the edit
(`originalFile`) and repeats the input's strings; a Write repeats the content it was given.
Sending that would cost observer tokens on every edit (and ship every line of the file).
What is dropped is only what the tool input already holds or what the patch shows.
"""

from __future__ import annotations

from typing import Any

# Flags that say nothing when false or empty.
_QUIET = {"interrupted": False, "isImage": False, "noOutputExpected": False,
          "userModified": False, "replaceAll": False, "stderr": ""}  # fmt: skip
_EDITS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})


def slim_response(tool_name: str, response: Any) -> Any:
    """The response without what the input already says; anything unknown is kept as it is."""
    if isinstance(response, list) and response and all(_is_text_block(b) for b in response):
        # MCP content blocks: the text is what the tool answered.
        return "\n".join(str(b["text"]) for b in response)
    if not isinstance(response, dict):
        return response
    slim = {k: v for k, v in response.items() if not (k in _QUIET and v == _QUIET[k])}
    if tool_name in _EDITS:
        for key in ("originalFile", "oldString", "newString", "content", "edits"):
            slim.pop(key, None)
        if slim.get("structuredPatch") == []:  # a new file: its content is the input's
            del slim["structuredPatch"]
        diff = _unified(slim.get("structuredPatch"))
        if diff is not None:
            del slim["structuredPatch"]
            slim["diff"] = diff
    return slim


def _is_text_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and "text" in block


def _unified(patch: Any) -> str | None:
    """A structuredPatch as unified-diff text; None for no patch or a shape not known here."""
    if not isinstance(patch, list) or not patch:
        return None
    out: list[str] = []
    for hunk in patch:
        if not isinstance(hunk, dict) or not isinstance(hunk.get("lines"), list):
            return None
        out.append(
            f"@@ -{hunk.get('oldStart')},{hunk.get('oldLines')}"
            f" +{hunk.get('newStart')},{hunk.get('newLines')} @@"
        )
        out.extend(str(line) for line in hunk["lines"])
    return "\n".join(out)
