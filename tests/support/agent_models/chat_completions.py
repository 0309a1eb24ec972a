"""A scripted fake of the OpenAI Chat Completions API (streaming) on 127.0.0.1, for real agents.

A conversation's Nth request (N = the assistant messages it already holds) answers the Nth
step of the script whose marker its first user message contains: tool calls or final text.
Side requests (no `tools`: title generation, summaries) get a short text. Every request is
recorded, so a test can read the system prompt the agent sent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec

SIDE_TEXT = "Webapp session"


class Call(msgspec.Struct, frozen=True):
    """One function call the model asks for: a tool name and its arguments."""

    name: str
    arguments: dict[str, Any]


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """One model turn: tool calls (answered by the agent's next request) or a final text."""

    calls: tuple[Call, ...] = ()
    text: str = ""


def tool(name: str, **arguments: Any) -> Step:
    """A step making one tool call."""
    return Step(calls=(Call(name, arguments),))


def say(text: str) -> Step:
    """A step answering with text only (the end of the turn)."""
    return Step(text=text)


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request the fake received."""

    body: dict[str, Any]
    headers: dict[str, str]
    system: str
    """Every system message's text, joined by newlines."""
    first_user: str
    step: int
    """How many assistant messages the conversation already held (the step it answered)."""
    side: bool
    """No tools offered: a title or other side request, answered with SIDE_TEXT."""


class ChatCompletionsModel:
    """The fake's handle: `base_url` for the agent's provider config, scripts, requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: list[tuple[str, list[Step]]] = []
        self._requests: list[ModelRequest] = []
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.model = self
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def script(self, marker: str, *steps: Step) -> None:
        """Conversations whose first user message contains `marker` play these steps."""
        with self._lock:
            self._scripts.append((marker, list(steps)))

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def close(self) -> None:
        """Stop the server."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _answer(self, body: dict[str, Any], headers: dict[str, str]) -> Step:
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        request = ModelRequest(
            body=body,
            headers={k.lower(): v for k, v in headers.items()},
            system="\n".join(
                _text(m.get("content")) for m in messages if m.get("role") == "system"
            ),
            first_user=users[0] if users else "",
            step=sum(m.get("role") == "assistant" for m in messages),
            side=not body.get("tools"),
        )
        with self._lock:
            self._requests.append(request)
            scripts = list(self._scripts)
        if request.side:
            return say(SIDE_TEXT)
        for marker, steps in scripts:
            if marker in request.first_user:
                if request.step < len(steps):
                    return steps[request.step]
                return say("Done.")
        return say(f"no script for {request.first_user[:80]!r}")

    def _next_id(self) -> int:
        return next(self._ids)


@contextmanager
def chat_completions_model() -> Iterator[ChatCompletionsModel]:
    """A running ChatCompletionsModel, closed on the way out."""
    model = ChatCompletionsModel()
    try:
        yield model
    finally:
        model.close()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _chunks(step: Step, model: str, n: int) -> list[dict[str, Any]]:
    base = {"id": f"chatcmpl-fake{n}", "object": "chat.completion.chunk", "model": model}
    base["created"] = int(time.time())
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if step.text:
        deltas.append({"content": step.text})
    for index, call in enumerate(step.calls):
        function = {"name": call.name, "arguments": json.dumps(call.arguments)}
        deltas.append(
            {
                "tool_calls": [
                    {"index": index, "id": f"call_{n}_{index}", "type": "function",
                     "function": function}
                ]
            }
        )  # fmt: skip
    chunks = [base | {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    finish = "tool_calls" if step.calls else "stop"
    chunks.append(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    chunks.append(base | {"choices": [], "usage": usage})
    return chunks


def _completion(step: Step, model: str, n: int) -> dict[str, Any]:
    calls = [
        {"id": f"call_{n}_{i}", "type": "function",
         "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
        for i, c in enumerate(step.calls)
    ]  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-fake{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ChatCompletionsModel

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # an agent that hung up mid-stream


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            return
        self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if not self.path.split("?", 1)[0].endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        model = self.server.model
        step = model._answer(body, dict(self.headers.items()))
        n, name = model._next_id(), str(body.get("model", "fake-model"))
        if not body.get("stream"):
            self._send(200, _completion(step, name, n))
            return
        data = b"".join(
            b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in _chunks(step, name, n)
        )
        data += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
