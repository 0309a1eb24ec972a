"""Claude Code's tool responses trimmed: what the input or the patch says is not sent twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from worker.ingest.agents.responses import slim_response

REAL = Path(__file__).resolve().parents[2] / "data" / "claude_code" / "2.1.328"


def _response(name: str) -> tuple[str, Any]:
    payload = json.loads((REAL / name).read_text())
    return payload["tool_name"], payload["tool_response"]


def test_an_edit_keeps_the_patch_as_a_diff_and_drops_the_whole_file() -> None:
    slim = slim_response(*_response("PostToolUse-Edit.json"))
    assert slim == {
        "filePath": "/home/dev/webapp/app/billing.py",
        "diff": "@@ -1,7 +1,7 @@\n"
        ' """Billing rules for the shop."""\n \n LOYALTY_RATE = 0.1\n'
        "-MAX_DISCOUNT = 0.9\n+MAX_DISCOUNT = 0.5\n \n \n"
        " def loyalty_discount(total: float, years: int) -> float:",
    }


def test_a_write_keeps_only_what_the_input_does_not_hold() -> None:
    tool, response = _response("PostToolUse-Write.json")
    assert slim_response(tool, response) == {"type": "create", "filePath": response["filePath"]}


def test_bash_drops_its_false_flags_and_empty_stderr() -> None:
    tool, response = _response("PostToolUse-Bash.json")
    slim = slim_response(tool, response)
    assert slim["stdout"] == response["stdout"]
    assert set(slim) <= {"stdout", "stderr"} | {k for k, v in response.items() if v}


def test_a_read_is_kept_whole() -> None:
    tool, response = _response("PostToolUse-Read.json")
    assert slim_response(tool, response) == response


def test_mcp_content_blocks_become_their_text() -> None:
    blocks = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    assert slim_response("mcp__github__get_issue", blocks) == "first\nsecond"


@pytest.mark.parametrize(
    "response",
    [
        "plain text",
        [{"type": "image", "source": {}}],
        {"structuredPatch": "not a list", "filePath": "a"},
        {"structuredPatch": [{"no": "lines"}], "filePath": "a"},
        None,
    ],
)
def test_shapes_it_does_not_know_are_kept(response: Any) -> None:
    assert slim_response("Edit", response) == response
