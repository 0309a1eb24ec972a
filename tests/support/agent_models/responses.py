"""A loopback fake of the OpenAI Responses API (streaming SSE), as Codex CLI speaks it.

Each conversation (Codex's `prompt_cache_key`, its thread id) takes the next queued script:
its Nth model request is answered with the script's Nth step (a tool call or a final
message), except that a tool search which found nothing is repeated; past the script's end
every request gets a final "done." message. Every request is recorded, so a test can assert
what reached the model (e.g. memq's SessionStart context as a developer message).
Self-contained: it shares nothing with the sibling fakes.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest

RESPONSES_PATH = "/v1/responses"


class FunctionCall(msgspec.Struct, frozen=True, kw_only=True):
    """A step: the model calls a JSON-schema tool (Codex's shell is `exec_command` {cmd})."""

    name: str
    arguments: dict[str, Any]
    namespace: str | None = None
    """For a tool the request lists inside a namespace (Codex puts MCP servers' tools there)."""


class CustomCall(msgspec.Struct, frozen=True, kw_only=True):
    """A step: the model calls a freeform tool (Codex's `apply_patch` for gpt-5 models)."""

    name: str
    input: str


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """A step: the model's final answer of the turn."""

    text: str


class ToolSearch(msgspec.Struct, frozen=True, kw_only=True):
    """A step: the model searches Codex's deferred tools (how gpt-5 models reach MCP tools)."""

    query: str
    limit: int = 8
    retries: int = 40
    """Searches that found nothing are repeated (0.25 s apart, up to this many times): Codex
    starts MCP servers in the background, so an early search can miss their tools."""


Step = FunctionCall | CustomCall | ToolSearch | Message


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request the fake received."""

    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]
    conversation: str
    step: int  # the 0-based script step it was answered with
    received_at: float

    def messages(self, role: str) -> list[str]:
        """The text of every input message with `role` (user, developer, assistant)."""
        return [
            _text_of(item.get("content"))
            for item in self.body.get("input", [])
            if isinstance(item, dict) and item.get("type", "message") == "message"
            and item.get("role") == role
        ]  # fmt: skip

    def tool_outputs(self) -> dict[str, str]:
        """call_id -> output text (or found tools, as JSON) of every tool result sent back."""
        out: dict[str, str] = {}
        for item in self.body.get("input", []):
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_output"):
                output = item.get("output", item.get("tools"))
                out[str(item.get("call_id"))] = (
                    output if isinstance(output, str) else json.dumps(output)
                )
        return out


class FakeResponses:
    """The fake's handle: `base_url` for the provider config, `script()`, `requests`, `close()`."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._scripts: deque[list[Step]] = deque()
        self._conversations: dict[str, tuple[list[Step], Iterator[int]]] = {}
        self._requests: list[ModelRequest] = []
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def script(self, *steps: Step) -> None:
        """Queue the script of the next conversation that starts."""
        with self._lock:
            self._scripts.append(list(steps))

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def conversations(self) -> list[str]:
        """The conversations seen so far, in the order they started."""
        with self._lock:
            return list(self._conversations)

    def close(self) -> None:
        """Stop the server."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Step:
        conversation = str(
            body.get("prompt_cache_key") or headers.get("session_id") or headers.get("session-id")
            or "default"
        )  # fmt: skip
        with self._lock:
            if conversation not in self._conversations:
                script = self._scripts.popleft() if self._scripts else []
                self._conversations[conversation] = (script, itertools.count())
            script, counter = self._conversations[conversation]
            step = next(counter)
            retry = _missed_tools(body, script, step)
            if retry:  # the search once more: the script stays where it was
                self._conversations[conversation] = (script, itertools.count(step))
                step -= 1
            request = ModelRequest(
                path=path, headers=headers, body=body, conversation=conversation, step=step,
                received_at=time.time(),
            )  # fmt: skip
            self._requests.append(request)
            self._lock.notify_all()
        if retry:
            time.sleep(0.25)
        return script[step] if step < len(script) else Message(text="done.")

    def next_id(self, kind: str) -> str:
        """A fresh id for a response or an output item."""
        return f"{kind}_fake{next(self._ids):06d}"


def sse_events(fake: FakeResponses, step: Step, model: str) -> list[dict[str, Any]]:
    """The stream of one response: created, the output item added and done, completed."""
    response_id = fake.next_id("resp")
    if isinstance(step, Message):
        item: dict[str, Any] = {
            "type": "message", "id": fake.next_id("msg"), "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }  # fmt: skip
        added = {**item, "status": "in_progress", "content": []}
    elif isinstance(step, CustomCall):
        item = {
            "type": "custom_tool_call", "id": fake.next_id("ctc"), "status": "completed",
            "call_id": fake.next_id("call"), "name": step.name, "input": step.input,
        }  # fmt: skip
        added = item
    elif isinstance(step, ToolSearch):
        item = {
            "type": "tool_search_call", "id": fake.next_id("ts"), "status": "completed",
            "call_id": fake.next_id("call"), "execution": "client",
            "arguments": {"query": step.query, "limit": step.limit},
        }  # fmt: skip
        added = item
    else:
        item = {
            "type": "function_call", "id": fake.next_id("fc"), "status": "completed",
            "call_id": fake.next_id("call"), "name": step.name,
            "arguments": json.dumps(step.arguments),
        }  # fmt: skip
        if step.namespace is not None:
            item["namespace"] = step.namespace
        added = item
    base = {"id": response_id, "object": "response", "model": model, "created_at": int(time.time())}
    usage = {
        "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }  # fmt: skip
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
    ]
    if isinstance(step, Message):
        delta = {
            "type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
            "content_index": 0, "delta": step.text,
        }  # fmt: skip
        events.append(delta)
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.completed",
            "response": {**base, "status": "completed", "output": [item], "usage": usage},
        },
    ]
    return events


def _missed_tools(body: dict[str, Any], script: list[Step], step: int) -> bool:
    """Whether the previous step was a tool search that found nothing and may be repeated."""
    previous = script[step - 1] if 0 < step <= len(script) else None
    if not isinstance(previous, ToolSearch):
        return False
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    last = items[-1] if items else {}
    searches = sum(i.get("type") == "tool_search_call" for i in items)
    found = last.get("type") != "tool_search_output" or bool(last.get("tools"))
    return not found and searches <= previous.retries


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeResponses

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-stream (the agent was killed) is expected


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        # A provider's model list: empty, so the agent keeps its built-in model metadata.
        self._send_json(200, {"object": "list", "data": [], "models": []})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        path = self.path.split("?", 1)[0]
        if path != RESPONSES_PATH:
            self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake
        step = fake._answer(path, headers, body)
        events = sse_events(fake, step, str(body.get("model", "fake")))
        data = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(name="fake_responses")
def fake_responses_fixture() -> Iterator[FakeResponses]:
    """A running FakeResponses, closed after the test."""
    fake = FakeResponses()
    yield fake
    fake.close()
