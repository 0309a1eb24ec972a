"""Claude Code hook payloads → events, the transcript's last assistant message, project identity."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.events import End, Prompt, Summarize, ToolCall
from worker.ingest.agents.claude_code import HookPayloadError, decode_payload, events_from_payload
from worker.ingest.agents.transcript import last_assistant_message
from worker.project import resolve_project

DATA = Path(__file__).resolve().parents[2] / "data" / "claude_code"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SESSION = "9f2c1e7a-4b3d-4e8f-a1c2-5d6e7f809a1b"


def _fixture(name: str, **changes: Any) -> bytes:
    payload = json.loads((DATA / name).read_text())
    payload.update(changes)
    if payload.get("transcript_path") == "TRANSCRIPT":
        payload["transcript_path"] = str(DATA / "transcript.jsonl")
    return json.dumps(payload).encode()


def _events(raw: bytes) -> list[Any]:
    return events_from_payload(decode_payload(raw), project="shop", host="laptop", now=NOW)


def test_user_prompt_submit_becomes_a_prompt() -> None:
    (event,) = _events(_fixture("user_prompt_submit.json"))
    assert isinstance(event, Prompt)
    assert event.prompt_text == "Fix the discount rounding bug in the cart"
    assert (event.memory_session_id, event.project, event.occurred_at) == (SESSION, "shop", NOW)
    assert (event.host, event.agent) == ("laptop", "claude-code")


def test_post_tool_use_becomes_a_tool_call() -> None:
    (event,) = _events(_fixture("post_tool_use.json"))
    assert isinstance(event, ToolCall)
    assert event.tool_name == "Bash"
    assert event.tool_input == {
        "command": "pytest tests/test_cart.py -q",
        "description": "Run the cart tests",
    }
    assert event.tool_output["stdout"].endswith("1 failed, 4 passed in 0.12s")
    assert (event.cwd, event.tool_use_id) == ("/home/dev/shop", "toolu_01HkQ7rT9wXvYz3AbCdEfGhJ")
    assert event.memory_session_id == SESSION


def test_stop_becomes_a_summarize_with_the_last_assistant_text() -> None:
    call, event = _events(_fixture("stop.json"))
    # The turn's finished call comes first, under the id its PostToolUse hook publishes with.
    (hooked,) = _events(_fixture("post_tool_use.json"))
    assert isinstance(call, ToolCall)
    assert (call.event_id, call.tool_name, call.tool_output) == (
        hooked.event_id,
        "Bash",
        "1 failed, 4 passed",
    )
    assert isinstance(event, Summarize)
    # The last assistant line with text (a later tool-use-only line is skipped), blank runs cut.
    assert event.last_assistant_message == (
        "The discount was rounded before tax.\n\nI moved the rounding after tax; all 5 cart "
        "tests pass."
    )


def test_stop_without_a_readable_transcript_still_asks_for_a_summary() -> None:
    (event,) = _events(_fixture("stop.json", transcript_path="/nonexistent/t.jsonl"))
    assert isinstance(event, Summarize)
    assert event.last_assistant_message is None


def test_session_end_becomes_an_end_with_its_reason() -> None:
    (event,) = _events(_fixture("session_end.json"))
    assert isinstance(event, End)
    assert event.reason == "prompt_input_exit"


@pytest.mark.parametrize("hook", ["SessionStart", "PreToolUse", "Notification", "SubagentStop"])
def test_hooks_memq_does_not_record_give_no_events(hook: str) -> None:
    assert _events(_fixture("session_start.json", hook_event_name=hook)) == []


def test_a_tool_use_id_gives_the_same_event_id_every_time() -> None:
    first = _events(_fixture("post_tool_use.json"))[0].event_id
    assert _events(_fixture("post_tool_use.json"))[0].event_id == first
    other_tool = _events(_fixture("post_tool_use.json", tool_use_id="toolu_other"))[0]
    other_session = _events(_fixture("post_tool_use.json", session_id="other-session"))[0]
    assert first not in (other_tool.event_id, other_session.event_id)


def test_events_without_a_natural_id_get_fresh_ones() -> None:
    ids = {_events(_fixture("user_prompt_submit.json"))[0].event_id for _ in range(3)}
    assert len(ids) == 3


def test_a_request_names_its_prompt_and_its_summary_the_same_every_time_it_is_sent() -> None:
    # A hook sent twice (a relay that timed out after spooling, then the hook's own path)
    # must not store its prompt twice, nor ask for its summary twice.
    prompt = json.loads((REAL / "UserPromptSubmit.json").read_text())
    stop = json.loads((REAL / "Stop.json").read_text()) | {"transcript_path": None}

    def event_id(payload: dict[str, Any], **changes: Any) -> str:
        (event,) = _events(json.dumps(payload | changes).encode())
        return str(event.event_id)

    assert event_id(prompt) == event_id(prompt)
    assert event_id(stop) == event_id(stop)
    assert len({
        event_id(prompt),
        event_id(prompt, prompt_id="another-request"),
        event_id(prompt, session_id="another-session"),
        event_id(stop, prompt_id=prompt["prompt_id"], session_id=prompt["session_id"]),
        event_id(stop, prompt_id=prompt["prompt_id"], session_id=prompt["session_id"],
                 stop_hook_active=True),  # the same request's Stop, come again
    }) == 5  # fmt: skip
    assert event_id(prompt, prompt_id=None) != event_id(prompt, prompt_id=None)  # older CLIs


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "bad Claude Code hook payload"),
        (b"{not json", "bad Claude Code hook payload"),
        (b"[]", "Expected `object`"),
        (_fixture("post_tool_use.json", session_id=42), "`$.session_id`"),
        (_fixture("post_tool_use.json", session_id="has space"), "`$.session_id`"),
        (_fixture("user_prompt_submit.json", prompt=["a"]), "`$.prompt`"),
        (_fixture("post_tool_use.json", tool_name=7), "`$.tool_name`"),
        (_fixture("stop.json", stop_hook_active="yes"), "`$.stop_hook_active`"),
        (b'{"hook_event_name": "Stop"}', "missing required field `session_id`"),
    ],
    ids=[
        "empty",
        "not-json",
        "not-an-object",
        "int-session",
        "space-in-session",
        "list-prompt",
        "int-tool-name",
        "string-bool",
        "no-session",
    ],
)
def test_malformed_payloads_are_refused_with_the_field_named(raw: bytes, reason: str) -> None:
    with pytest.raises(HookPayloadError, match=reason.replace("$", r"\$")):
        decode_payload(raw)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (_fixture("user_prompt_submit.json", prompt=None), "no `prompt`"),
        (_fixture("post_tool_use.json", tool_name=None), "no `tool_name`"),
        (_fixture("post_tool_use.json", tool_name=""), "no `tool_name`"),
    ],
)
def test_a_hook_missing_its_own_field_is_refused(raw: bytes, reason: str) -> None:
    with pytest.raises(HookPayloadError, match=reason):
        _events(raw)


def _transcript(path: Path, lines: list[object]) -> str:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def test_the_transcript_is_read_from_its_end_across_block_boundaries(tmp_path: Path) -> None:
    filler = {"type": "user", "message": {"role": "user", "content": "x" * 5000}}
    answer = {"type": "assistant", "message": {"content": [{"type": "text", "text": "A" * 70_000}]}}
    path = _transcript(tmp_path / "t.jsonl", [answer, *[filler] * 40])
    assert last_assistant_message(path) == "A" * 70_000


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([{"role": "assistant", "content": "plain string"}], "plain string"),
        ([{"type": "assistant", "message": {"content": [{"type": "text", "text": "  "}]}}], None),
        (["not an object", {"type": "user", "message": {"content": "q"}}], None),
        ([{"type": "assistant", "message": {"content": "ok"}}, "{broken"], "ok"),
    ],
    ids=["role-field", "blank-text", "no-assistant", "malformed-last-line"],
)
def test_last_assistant_message_variants(
    tmp_path: Path, lines: list[object], expected: str | None
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join((x if isinstance(x, str) and x.startswith("{") else json.dumps(x)) + "\n"
                for x in lines)
    )  # fmt: skip
    assert last_assistant_message(str(path)) == expected


def _git_repo(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    return root


def test_project_is_the_repository_holding_the_cwd(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "shop")
    (repo / "src" / "cart").mkdir(parents=True)
    assert resolve_project(repo / "src" / "cart") == "shop"


def test_a_worktree_maps_to_its_main_repository(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "shop")
    gitdir = repo / ".git" / "worktrees" / "feature-x"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    worktree = tmp_path / "shop-feature-x"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {gitdir}\n")
    assert resolve_project(worktree) == "shop"


def test_a_relative_worktree_gitdir_is_followed(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "shop")
    gitdir = repo / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..")
    worktree = tmp_path / "trees" / "wt"
    worktree.mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: ../../shop/.git/worktrees/wt")
    assert resolve_project(worktree / ".") == "shop"


def test_a_worktree_of_a_bare_repository_is_named_without_dot_git(tmp_path: Path) -> None:
    bare = tmp_path / "shop.git"
    gitdir = bare / "worktrees" / "main"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..")
    worktree = tmp_path / "main"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {gitdir}")
    assert resolve_project(worktree) == "shop"


def test_a_submodule_is_its_own_project(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "shop")
    modules = repo / ".git" / "modules" / "vendor-lib"
    modules.mkdir(parents=True)
    sub = repo / "vendor-lib"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../.git/modules/vendor-lib")
    assert resolve_project(sub) == "vendor-lib"


def test_outside_any_repository_the_cwd_names_the_project(tmp_path: Path) -> None:
    plain = tmp_path / "scratch"
    plain.mkdir()
    assert resolve_project(plain) == "scratch"


def test_memq_project_overrides_everything(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "shop")
    assert resolve_project(repo, "billing") == "billing"


REAL = DATA / "2.1.328"  # captured from the real binary (see the captures' README in shared/)


def _real(name: str) -> list[Any]:
    return _events((REAL / name).read_bytes())


def test_a_real_post_tool_use_failure_is_a_failed_call_with_the_error_as_output() -> None:
    (event,) = _real("PostToolUseFailure-Bash.json")
    assert isinstance(event, ToolCall)
    assert (event.tool_name, event.failed) == ("Bash", True)
    assert event.tool_output == "Exit code 1\n3 passed, 1 failed\nAssertionError: 45.0 != 50.0"
    assert event.tool_use_id == "toolu_7143c81dc0004d78a4cf7682"


def test_a_real_stop_uses_its_own_last_assistant_message() -> None:
    payload = json.loads((REAL / "Stop.json").read_text())
    (event,) = _events(json.dumps(payload | {"transcript_path": None}).encode())
    assert isinstance(event, Summarize)
    assert event.last_assistant_message == payload["last_assistant_message"]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in REAL.glob("*.json") if p.name != "http-headers.json")
)
def test_every_real_payload_decodes_and_new_fields_are_ignored(name: str) -> None:
    payload = json.loads((REAL / name).read_text())
    payload["transcript_path"] = None  # the capture's transcript is not here
    events = _events(json.dumps(payload | {"a_field_of_a_later_version": {"x": 1}}).encode())
    kinds = {
        "SessionStart": [], "UserPromptSubmit": [Prompt], "PostToolUse": [ToolCall],
        "PostToolUseFailure": [ToolCall], "Stop": [Summarize], "SessionEnd": [End],
    }  # fmt: skip
    assert [type(e) for e in events] == kinds[payload["hook_event_name"]]


@pytest.mark.parametrize(
    ("source", "injects"),
    [("startup", True), ("clear", True), ("compact", True), ("resume", False)],
)
def test_session_start_injects_context_except_into_a_resumed_conversation(
    source: str, injects: bool
) -> None:
    from worker.ingest.agents.claude_code import read_hook

    payload = json.loads((REAL / "SessionStart-startup.json").read_text()) | {"source": source}
    hook = read_hook(json.dumps(payload).encode(), project_of=lambda _: "webapp", host="h", now=NOW)
    assert (hook.session_start, hook.events) == (injects, [])
