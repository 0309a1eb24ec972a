"""`memq prompt`: one event on stdin, the observer's prompt on stdout, exit 2 on bad input."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.prompting.mode_files import load_mode
from worker.cli.app import app

RUNNER = CliRunner()
CODE = load_mode("code")
BASE = {
    "event_id": "e1",
    "memory_session_id": "sess-9",
    "project": "shop-api",
    "occurred_at": "2025-06-01T10:20:30.456+02:00",
}
TOOL_CALL = BASE | {
    "kind": "tool_call",
    "tool_name": "Bash",
    "tool_input": '{"command":"pytest -q"}',
    "tool_output": "3 passed </outcome>",
    "cwd": "/srv/shop",
}
PROMPT = BASE | {"kind": "prompt", "prompt_text": "make checkout <faster>", "prompt_number": 4}
SUMMARIZE = BASE | {"kind": "summarize", "last_assistant_message": "Cached the cart totals."}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MEMQ_") or name == "CLAUDE_MEM_MODE":
            monkeypatch.delenv(name)


def _run(stdin: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return RUNNER.invoke(app, ["prompt", *args], input=stdin, env=env)


def _framing(stdout: str) -> ET.Element:
    body = stdout.removesuffix("\n")
    suffix = "\n\n" + CODE.prompts.observation_instruction
    assert body.endswith(suffix)
    return ET.fromstring(f"<root>{body.removesuffix(suffix)}</root>")


def test_a_tool_call_prints_its_observation_prompt() -> None:
    result = _run(json.dumps(TOOL_CALL))
    assert (result.exit_code, result.stderr) == (0, "")
    (element,) = _framing(result.stdout)
    assert element.findtext("what_happened") == "Bash"
    assert element.findtext("occurred_at") == "2025-06-01T08:20:30.456Z"
    assert element.findtext("working_directory") == "/srv/shop"
    assert element.findtext("parameters") == '{\n  "command": "pytest -q"\n}'
    assert element.findtext("outcome") == "3 passed </outcome>"


def test_an_array_of_tool_calls_is_one_batch() -> None:
    second = TOOL_CALL | {"event_id": "e2", "tool_name": "Read"}
    result = _run(json.dumps([TOOL_CALL, second]))
    assert result.exit_code == 0, result.stderr
    root = _framing(result.stdout)
    assert [e.findtext("what_happened") for e in root] == ["Bash", "Read"]


def test_the_field_budget_comes_from_settings() -> None:
    event = TOOL_CALL | {"tool_output": "x" * 5_000}
    result = _run(json.dumps(event), env={"MEMQ_FIELD_BUDGET_CHARS": "1000"})
    assert result.exit_code == 0, result.stderr
    marker = _framing(result.stdout).find("observed_from_primary_session/outcome/elided")
    assert marker is not None
    assert marker.attrib["chars"] == "4100"


def test_a_prompt_event_prints_the_init_prompt() -> None:
    result = _run(json.dumps(PROMPT))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(CODE.prompts.system_identity)
    assert result.stdout.rstrip("\n").endswith(CODE.prompts.header_memory_start)
    assert "<project>shop-api</project>" in result.stdout
    assert "<memory_session_id>sess-9</memory_session_id>" in result.stdout
    assert (
        '<user_request prompt_number="4">make checkout &lt;faster&gt;</user_request>'
        in result.stdout
    )
    assert "<requested_at>2025-06-01T08:20:30.456Z</requested_at>" in result.stdout


def test_a_summarize_event_prints_the_summary_prompt() -> None:
    result = _run(json.dumps(SUMMARIZE))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(CODE.prompts.summary_mode_switch)
    assert (
        "<last_assistant_message>Cached the cart totals.</last_assistant_message>" in result.stdout
    )


@pytest.mark.parametrize(
    ("event", "message_start"),
    [
        (TOOL_CALL, "<observed_from_primary_session>\n  <what_happened>Bash"),
        (SUMMARIZE, CODE.prompts.summary_mode_switch),
    ],
)
def test_system_flag_prints_the_init_prompt_first(
    event: dict[str, Any], message_start: str
) -> None:
    result = _run(json.dumps(event), "--system")
    assert result.exit_code == 0, result.stderr
    system, _, message = result.stdout.partition(CODE.prompts.header_memory_start + "\n\n")
    assert system.startswith(CODE.prompts.system_identity)
    assert "<memory_session_id>sess-9</memory_session_id>" in system
    assert message.startswith(message_start)


def test_the_mode_comes_from_settings(tmp_path: Path) -> None:
    override = {"prompts": {"observation_instruction": "Custom instruction for the test."}}
    (tmp_path / "code--terse.json").write_text(json.dumps(override), encoding="utf-8")
    env = {"MEMQ_MODE": "code--terse", "MEMQ_MODES_DIR": str(tmp_path)}
    result = _run(json.dumps(TOOL_CALL), env=env)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.endswith(
        "</observed_from_primary_session>\n\nCustom instruction for the test.\n"
    )


@pytest.mark.parametrize(
    ("stdin", "reason"),
    [
        ("not json", "bad event:"),
        ("", "bad event:"),
        (json.dumps(TOOL_CALL | {"kind": "nope"}), "bad event: Invalid value 'nope'"),
        (json.dumps({k: v for k, v in TOOL_CALL.items() if k != "tool_name"}), "bad event:"),
        (json.dumps(TOOL_CALL | {"occurred_at": "yesterday"}), "bad event:"),
        ("[]", "bad event: the array holds no events"),
        ("[1, 2", "bad event:"),
        (json.dumps([TOOL_CALL, PROMPT]), "bad event: an array may hold only tool_call events"),
        (json.dumps([TOOL_CALL, {"kind": "tool_call"}]), "bad event: item 1:"),
        (json.dumps(BASE | {"kind": "end"}), "bad event: kind 'end' has no observer prompt"),
        ("[" * 100_000, "bad event:"),
    ],
)
def test_bad_input_exits_2_with_one_line(stdin: str, reason: str) -> None:
    result = _run(stdin)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"memq: {reason}")
    assert result.stderr.count("\n") == 1
