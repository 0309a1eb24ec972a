"""Reading the turn back from Claude Code's transcript: the calls no hook may have delivered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worker.ingest.agents.transcript import read_turn


def _user(text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": text}}


def _use(use_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    block = {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}
    return {"type": "assistant", "timestamp": "2026-12-01T10:00:00.000Z", "cwd": "/home/dev/app",
            "message": {"role": "assistant", "content": [block]}}  # fmt: skip


def _result(use_id: str, content: Any, *, error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": content, "is_error": error}
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def _say(text: str) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant",
            "content": [{"type": "text", "text": text}]}}  # fmt: skip


def _write(path: Path, lines: list[Any]) -> str:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(path)


def test_the_turn_holds_the_calls_since_the_users_last_prompt_in_order(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [
        _user("first request"), _use("a", "Read", file_path="old.py"), _result("a", "old"),
        _say("done with the first"),
        _user("second request"),
        _use("b", "Read", file_path="missing.py"),
        _result("b", "<tool_use_error>File does not exist.</tool_use_error>", error=True),
        _use("c", "Bash", command="ls"), _result("c", [{"type": "text", "text": "a.py"}]),
        _say("all done"),
    ])  # fmt: skip
    turn = read_turn(path)
    assert [(c.tool_use_id, c.tool_name, c.failed) for c in turn.calls] == [
        ("b", "Read", True), ("c", "Bash", False),
    ]  # fmt: skip
    assert turn.calls[0].result == "<tool_use_error>File does not exist.</tool_use_error>"
    assert turn.calls[1].result == "a.py"  # text blocks joined
    assert (turn.calls[1].cwd, turn.calls[1].occurred_at is not None) == ("/home/dev/app", True)
    assert turn.last_assistant_message == "all done"


def test_a_call_with_no_result_was_interrupted_and_is_left_out(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [
        _user("go"), _use("a", "Bash", command="sleep 100"), _use("b", "Read", file_path="x"),
        _result("b", "x"), "{broken json",
    ])  # fmt: skip
    assert [c.tool_use_id for c in read_turn(path).calls] == ["b"]


def test_an_unreadable_transcript_is_an_empty_turn(tmp_path: Path) -> None:
    assert read_turn(str(tmp_path / "none.jsonl")).calls == []
    assert read_turn(None).last_assistant_message is None


def test_the_last_answer_may_come_from_before_the_turn(tmp_path: Path) -> None:
    # A turn with tool calls and no text of its own still has a last assistant message.
    path = _write(tmp_path / "t.jsonl", [
        _say("earlier answer"), _user("go"), _use("a", "Read", file_path="x"), _result("a", "x"),
    ])  # fmt: skip
    turn = read_turn(path)
    assert ([c.tool_use_id for c in turn.calls], turn.last_assistant_message) == (
        ["a"], "earlier answer",
    )  # fmt: skip
