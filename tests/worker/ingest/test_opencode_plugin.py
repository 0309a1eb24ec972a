"""memq's OpenCode plugin under node, fed OpenCode 1.18.33's captured hook payloads.

The plugin file runs as it ships; what it sends (to a recording endpoint, or to a stand-in
`memq` command when the endpoint is down) must decode with the Python reader.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pipeline.events import End, Prompt, Summarize, ToolCall
from tests.support.ports import free_port
from worker.ingest.agents import opencode

CAPTURED = Path(__file__).resolve().parents[2] / "data" / "opencode"
PLUGIN = Path(opencode.__file__).with_name(opencode.PLUGIN_FILE)
SESSION = "ses_dcc86c9aeffe3GC9sE0ONUURhX"
CONTEXT = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "CTX"}}
# Replays the steps on the plugin's hooks; prints the system prompts it built.
DRIVER = """
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const [plugin, steps] = process.argv.slice(1);
const { MemqPlugin } = await import(pathToFileURL(plugin).href);
const hooks = await MemqPlugin({ directory: "/home/dev/webapp", worktree: "/home/dev/webapp" });
const systems = [];
for (const step of JSON.parse(readFileSync(steps, "utf8"))) {
  if (step.hook === "event") await hooks.event({ event: step.event });
  else if (step.hook === "experimental.chat.system.transform") {
    const output = { system: ["OpenCode's own"] };
    await hooks[step.hook](step.input, output);
    systems.push(output.system);
  } else await hooks[step.hook](step.input, step.output);
}
console.log(JSON.stringify(systems));
"""


def _captured(name: str) -> Any:
    return json.loads((CAPTURED / f"{name}.json").read_text())


def _steps() -> list[dict[str, Any]]:
    failing = _captured("tool.execute.after-bash")
    failing["input"]["callID"] = "call_bash_9"
    failing["output"]["metadata"]["exit"] = 1
    mcp = _captured("tool.execute.after-memq_search")
    mcp["input"]["sessionID"] = SESSION
    thrown = _captured("event-message.part.updated-tool-read-completed")
    thrown["properties"]["part"] |= {"callID": "call_read_8"}
    thrown["properties"]["part"]["state"] = {
        "status": "error", "input": {"filePath": "/nope"}, "error": "File not found: /nope",
    }  # fmt: skip
    events = [
        "event-message.updated-user",
        "event-message.part.updated-text-user",
        "event-message.part.updated-text-assistant",
        "event-session.idle",
    ]
    steps = [
        _captured("chat.message"),
        {"hook": "event", "event": _captured(events[0])},
        {"hook": "event", "event": _captured(events[1])},
        _captured("experimental.chat.system.transform"),
        _captured("experimental.chat.system.transform"),  # the context is fetched once
        _captured("tool.execute.after-bash"),
        _captured("tool.execute.after-read"),
        _captured("tool.execute.after-edit"),
        failing,
        mcp,
        {"hook": "event", "event": thrown},
        {"hook": "event", "event": _captured(events[2])},
        {"hook": "event", "event": _captured(events[3])},
        {"hook": "dispose", "input": None, "output": None},
    ]
    return steps


class _Recorder(ThreadingHTTPServer):
    daemon_threads = True
    posts: list[tuple[str, dict[str, str], dict[str, Any]]]
    status = 200


class _Handler(BaseHTTPRequestHandler):
    server: _Recorder

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.posts.append((self.path, headers, body))
        answer = json.dumps(CONTEXT if body["hook"] == "session_start" else "").encode()
        if self.server.status != 200:
            answer = b"memq agent: missing or wrong `Authorization: Bearer` token\n"
        self.send_response(self.server.status)
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


@pytest.fixture(name="endpoint")
def _fix_endpoint() -> Iterator[_Recorder]:
    server = _Recorder(("127.0.0.1", 0), _Handler)
    server.posts = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def _run_plugin(tmp_path: Path, env: dict[str, str]) -> list[list[str]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: scripts/agents.sh installs Debian's npm (and node)")
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps(_steps()))
    done = subprocess.run(
        [node, "--input-type=module", "-e", DRIVER, str(PLUGIN), str(steps)],
        env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    systems: list[list[str]] = json.loads(done.stdout)
    return systems


def _decoded(bodies: list[dict[str, Any]]) -> list[Any]:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    return [
        event
        for body in bodies
        for event in opencode.read_hook(
            json.dumps(body).encode(), project_of=lambda cwd: "webapp", host="h", now=now
        ).events
    ]


def _check_events(events: list[Any]) -> None:
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Prompt", *["ToolCall"] * 6, "Summarize", "End"]
    prompt, *calls, summary, end = events
    assert isinstance(prompt, Prompt)
    assert prompt.prompt_text == '"Read README.md and add a line about running the tests."'
    assert all(isinstance(c, ToolCall) for c in calls)
    by_id = {c.tool_use_id: c for c in calls}
    assert by_id["call_bash_2"].tool_input["command"] == "cat README.md"
    assert by_id["call_bash_2"].tool_output.startswith("# webapp")
    assert by_id["call_read_3"].tool_output.startswith("<path>/home/dev/webapp/README.md</path>")
    assert by_id["call_edit_4"].tool_output == "Edit applied successfully."
    assert by_id["call_memq_search_5"].tool_output == "no memories yet"
    assert by_id["call_read_8"].tool_output == "File not found: /nope"
    failed = {c.tool_use_id for c in calls if c.failed}
    assert failed == {"call_bash_9", "call_read_8"}
    assert isinstance(summary, Summarize)
    # The user's text part is not the answer; the assistant's last text part is.
    assert summary.last_assistant_message == "Done: I read README.md and added a Tests line."
    assert isinstance(end, End)
    assert end.reason == "dispose"
    assert {e.memory_session_id for e in events} == {SESSION}


def test_the_plugin_posts_each_event_and_injects_the_context_once(
    tmp_path: Path, endpoint: _Recorder
) -> None:
    url = f"http://127.0.0.1:{endpoint.server_address[1]}/"
    systems = _run_plugin(tmp_path, {"MEMQ_AGENT_URL": url, "MEMQ_AGENT_TOKEN": "t" * 32})
    assert systems == [["OpenCode's own", "CTX"]] * 2
    paths = {path for path, _, _ in endpoint.posts}
    assert paths == {"/hooks/opencode"}
    assert {h["authorization"] for _, h, _ in endpoint.posts} == {"Bearer " + "t" * 32}
    assert not any("origin" in h for _, h, _ in endpoint.posts)
    bodies = [body for _, _, body in endpoint.posts]
    starts = [b for b in bodies if b["hook"] == "session_start"]
    assert starts == [
        {
            "hook": "session_start", "session_id": SESSION,
            "directory": "/home/dev/webapp", "worktree": "/home/dev/webapp",
        }
    ]  # fmt: skip
    _check_events(_decoded([b for b in bodies if b["hook"] != "session_start"]))


@pytest.mark.parametrize("endpoint_state", ["down", "refusing the token"])
def test_without_the_endpoint_the_plugin_pipes_each_event_to_memq_hook(
    tmp_path: Path, endpoint: _Recorder, endpoint_state: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record.jsonl"
    memq = bin_dir / "memq"
    memq.write_text(
        "#!/bin/sh\n"
        '[ "$1 $2" = "hook opencode" ] || exit 2\n'
        'input=$(cat); printf "%s\\n" "$input" >> "$RECORD_FILE"\n'
        'case "$input" in *session_start*) printf "%s" \'' + json.dumps(CONTEXT) + "';; esac\n"
    )
    memq.chmod(0o755)
    endpoint.status = 401
    port = free_port() if endpoint_state == "down" else endpoint.server_address[1]
    env = {
        "MEMQ_AGENT_URL": f"http://127.0.0.1:{port}",
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "RECORD_FILE": str(record),
    }
    systems = _run_plugin(tmp_path, env)
    assert systems == [["OpenCode's own", "CTX"]] * 2
    bodies = [json.loads(line) for line in record.read_text().splitlines()]
    assert [b["hook"] for b in bodies].count("session_start") == 1
    events = _decoded([b for b in bodies if b["hook"] != "session_start"])
    _check_events(events)
    if endpoint_state == "refusing the token":
        # The post it refused and the fallback carried one JSON: one event id for each event,
        # the summarize and the end included (their key is the plugin's own).
        posted = _decoded([b for _, _, b in endpoint.posts if b["hook"] != "session_start"])
        assert [e.event_id for e in posted] == [e.event_id for e in events]
        assert all(e.event_id.startswith("oc-") and len(e.event_id) == 43 for e in events)
