"""bench/agents.py's runners: the hook times each reads back, the same work for every agent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.agent_runs import claude_code, codex, gemini, opencode
from bench.agents import RUNNERS


def test_claude_code_hook_times_come_from_its_debug_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "debug.log"
    log.write_text(
        "2026-12-01T10:00:00.000Z [DEBUG] Hooks: PostToolUse:Bash [memq hook claude-code] "
        "finished with status 0 (74ms)\n"
        "2026-12-01T10:00:01.000Z [DEBUG] Hooks: SessionStart [memq hook claude-code] "
        "finished with status 0 (210ms)\n"
        "2026-12-01T10:00:02.000Z [DEBUG] Hooks: PostToolUse:Read [memq hook claude-code] "
        "finished with status 0 (81ms)\n"
    )
    assert claude_code.hook_times(log) == {"PostToolUse": [74.0, 81.0], "SessionStart": [210.0]}
    assert claude_code.hook_times(tmp_path / "missing.log") == {}


def test_claude_code_http_hook_times_pair_the_post_after_a_tool_with_its_response(
    tmp_path: Path,
) -> None:
    log = tmp_path / "debug.log"
    log.write_text(
        "2026-12-02T02:25:33.884Z [DEBUG] Hooks: HTTP hook POST to http://127.0.0.1:1/hooks/x\n"
        "2026-12-02T02:25:34.056Z [DEBUG] Hooks: HTTP hook response status 200, body length 0\n"
        "2026-12-02T02:25:34.430Z [INFO] [Stall] tool_dispatch_end tool=Bash outcome=ok\n"
        "2026-12-02T02:25:34.438Z [DEBUG] Hooks: HTTP hook POST to http://127.0.0.1:1/hooks/x\n"
        "2026-12-02T02:25:34.444Z [DEBUG] Hooks: HTTP hook response status 200, body length 0\n"
    )
    # The first POST (a prompt's, no tool before it) is not a PostToolUse.
    assert claude_code.hook_times(log) == {"PostToolUse": [6.0]}


def test_gemini_hook_times_come_from_its_debug_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "debug.log"
    log.write_text(
        "[DEBUG] Hook execution for AfterTool: 1 hooks executed successfully, "
        "total duration: 74ms\n"
        "[DEBUG] Hook execution for BeforeAgent: 1 hooks executed successfully, "
        "total duration: 90ms\n"
    )
    assert gemini.hook_times(log) == {"AfterTool": [74.0], "BeforeAgent": [90.0]}


def test_the_codex_wrapper_runs_memq_with_the_payload_and_times_it(tmp_path: Path) -> None:
    # A stand-in for `memq`: echoes its stdin and exits 3, so the wrapper must pass both on.
    memq = tmp_path / "memq"
    memq.write_text('#!/bin/bash\n[ "$1 $2" = "hook codex" ] || exit 9\ncat; exit 3\n')
    memq.chmod(0o755)
    hooks = {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"{memq} hook codex", "timeout": 3}]}]}}  # fmt: skip
    (tmp_path / "hooks.json").write_text(json.dumps(hooks))
    log = tmp_path / "hooks.log"
    codex.wrap_hooks(tmp_path, str(memq), log)
    (handler,) = json.loads((tmp_path / "hooks.json").read_text())["hooks"]["PostToolUse"][0][
        "hooks"
    ]
    done = subprocess.run(
        ["bash", "-c", handler["command"]], input="{}", capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (3, "{}")
    (ms,) = codex.hook_times(log)["PostToolUse"]
    assert 0 < ms < 5000


def test_every_agents_session_is_the_same_reads_and_shell_commands(tmp_path: Path) -> None:
    assert set(RUNNERS) == {"claude-code", "codex", "gemini", "opencode"}
    claude = [(s.name, s.input.get("command") or s.input["file_path"])
              for s in claude_code.script(4)[:-1]]  # fmt: skip
    assert claude == [("Bash", "echo step 0"), ("Read", "README.md"), ("Bash", "echo step 2"),
                      ("Read", "README.md")]  # fmt: skip
    assert [s.arguments["cmd"] for s in codex.script(4)[:-1]] == [
        "echo step 0", "cat README.md", "echo step 2", "cat README.md"
    ]  # fmt: skip
    assert len(gemini.script(4)) == len(opencode.script(tmp_path, 4)) == 5
    for runner in RUNNERS.values():
        assert set(runner.hook_source) == set(runner.setups)
