"""Codex CLI's rollout (JSON lines): the tool calls of one turn, as its hooks would name them.

Codex runs no PostToolUse hook for a call that failed, except a shell command (seen in
0.169.0: a patch that does not apply, an MCP tool error, a missing image), so at Stop the
turn is read back from the rollout and each finished call is published again under the
event id its hook would have used: the publish script keeps the first copy only, so the
calls no hook reported are recorded, marked failed when Codex's own record says so (or a
patch's output is its error). A shell command's hook has no exit code either, but its
rollout record, already written when the hook runs, has the status (`has_failed`).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import msgspec

from worker.ingest.agents.timestamps import aware_timestamp

_TAIL_BYTES = 8 * 1024 * 1024  # a turn's lines are near the end
_CALL_TAIL_BYTES = 1024 * 1024  # a call's own lines were written just before its hook ran
_FAILED = frozenset({"failed", "declined"})


class RolloutCall(msgspec.Struct, frozen=True, kw_only=True):
    """One finished tool call of the turn, named as its PostToolUse hook names it."""

    tool_use_id: str
    tool_name: str
    tool_input: Any
    result: Any
    failed: bool
    occurred_at: datetime | None


class _Call(msgspec.Struct, kw_only=True):
    tool_name: str
    tool_input: Any
    result: Any = None
    finished: bool = False
    status: str | None = None  # the item's status in Codex's own event, when it has one
    occurred_at: datetime | None = None


def has_failed(rollout_path: str | None, call_id: str | None) -> bool:
    """Whether Codex's own record of call `call_id` says it failed (False when unknown).

    A shell command's PostToolUse payload has no exit code, but by the time the hook runs
    the rollout holds the command's `item_completed` event, with its status.
    """
    if not rollout_path or not call_id:
        return False
    tail = _tail(rollout_path, _CALL_TAIL_BYTES)
    marker = f'"id":"{call_id}"'.encode()
    for line in reversed(tail.split(b"\n")):
        if marker in line and b'"item_completed"' in line:
            calls = {call_id: _Call(tool_name="", tool_input=None)}
            _read_line(line, calls)
            return calls[call_id].status in _FAILED
    return False


def read_turn_calls(rollout_path: str | None, turn_id: str | None) -> list[RolloutCall]:
    """The finished tool calls of turn `turn_id`, in order; empty when unreadable."""
    if not rollout_path or not turn_id:
        return []
    tail = _tail(rollout_path, _TAIL_BYTES)
    marker = turn_id.encode()
    first = tail.find(marker)  # every line of the turn names it: start at the first one
    if first < 0:
        return []
    calls: dict[str, _Call] = {}
    for line in tail[tail.rfind(b"\n", 0, first) + 1 :].split(b"\n"):
        if marker in line:  # the rest (token counts, other turns) are skipped undecoded
            _read_line(line, calls)
    finished: list[RolloutCall] = []
    for call_id, c in calls.items():
        if c.finished:
            call = RolloutCall(
                tool_use_id=call_id, tool_name=c.tool_name, tool_input=c.tool_input,
                result=c.result, failed=_failed(c), occurred_at=c.occurred_at,
            )  # fmt: skip
            finished.append(call)
    return finished


def _tail(path: str, size: int) -> bytes:
    """The file's last `size` bytes; empty when unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - size))
            return f.read()
    except OSError:
        return b""


def _read_line(line: bytes, calls: dict[str, _Call]) -> None:
    try:
        entry = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):  # malformed, partly written or too deep
        return
    if not isinstance(entry, dict) or not isinstance(entry.get("payload"), dict):
        return
    item: dict[str, Any] = entry["payload"]
    kind = item.get("type")
    if entry.get("type") == "event_msg" and kind == "item_completed":
        done = item.get("item")
        if isinstance(done, dict) and str(done.get("id")) in calls:
            calls[str(done["id"])].status = str(done.get("status"))
        return
    if entry.get("type") != "response_item":
        return
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        return
    if kind in ("function_call", "custom_tool_call"):
        named = _named(item)
        if named is not None:
            calls[call_id] = _Call(tool_name=named[0], tool_input=named[1])
    elif kind in ("function_call_output", "custom_tool_call_output") and call_id in calls:
        call = calls[call_id]
        call.result = _output_text(call.tool_name, item.get("output"))
        call.finished = True
        call.occurred_at = aware_timestamp(entry.get("timestamp"))


def _named(item: dict[str, Any]) -> tuple[str, Any] | None:
    """(tool_name, tool_input) as Codex's PostToolUse hook reports the call."""
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None
    if item.get("type") == "custom_tool_call":  # freeform: apply_patch's input is the patch
        return name, {"command": item.get("input")}
    try:
        arguments = msgspec.json.decode(item.get("arguments") or "{}")
    except (TypeError, msgspec.DecodeError):
        arguments = item.get("arguments")
    if name == "exec_command" and isinstance(arguments, dict):
        return "Bash", {"command": arguments.get("cmd")}
    namespace = item.get("namespace")
    if isinstance(namespace, str) and namespace:  # an MCP server's tool: mcp__<server>__<tool>
        return f"{namespace.rstrip('_')}__{name}", arguments
    return name, arguments


def _output_text(tool_name: str, output: Any) -> Any:
    # Shell and MCP outputs open with Codex's own header ("Wall time: …\nOutput:"); the hook
    # reports only what follows it.
    if isinstance(output, list):
        texts = [str(b.get("text", "")) for b in output if isinstance(b, dict)]
        if texts and texts[0].rstrip().endswith("Output:"):
            texts = texts[1:]
        return "\n".join(texts)
    if isinstance(output, str) and tool_name == "Bash":
        _, found, rest = output.partition("\nOutput:\n")
        return rest if found else output
    return output


def _failed(call: _Call) -> bool:
    if call.status in _FAILED:  # Codex's own verdict (a command's exit code, an MCP error)
        return True
    result = call.result if isinstance(call.result, str) else ""
    if call.tool_name == "apply_patch":
        return not result.startswith("Exit code: 0\n")  # a failed patch's output is the error
    return False
