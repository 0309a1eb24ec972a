"""A loopback fake of the Gemini API for the real Gemini CLI: a scripted conversation.

The CLI is pointed at it with GOOGLE_GEMINI_BASE_URL. It serves
`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, `:generateContent` and
`:countTokens`. An agent request (one that offers tools) is answered with the step of the
script matching how many model turns its `contents` already hold: the first request gets
step 0, the request carrying step 0's function response gets step 1, and so on; past the
script it answers "Done.". Requests without tools (the CLI's own helpers: routing, titles,
loop checks) get a neutral answer. Every request is recorded for assertions.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest

_PATH = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):(\w+)$")
_DONE = "Done."


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """One model turn: function calls (name and args; several run in parallel) or a text."""

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    text: str = ""


def call(name: str, **args: Any) -> Step:
    """A step in which the model calls tool `name` with `args`."""
    return Step(calls=((name, args),))


def parallel(*steps: Step) -> Step:
    """One step making the calls of all `steps` at once (one model turn, several parts)."""
    return Step(calls=tuple(c for step in steps for c in step.calls))


def answer(text: str) -> Step:
    """A step in which the model ends its turn with `text`."""
    return Step(text=text)


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request the fake received."""

    model: str
    method: str  # streamGenerateContent, generateContent or countTokens
    body: dict[str, Any]
    step: int | None
    """The script step it was answered with; None for a request without tools."""

    @property
    def text(self) -> str:
        """Every string the request carried (system instruction, prompts, tool results)."""
        return "\n".join(_strings(self.body))


class FakeGemini:
    """The fake server's handle: set the script, read the requests, close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[Step] = []
        self._requests: list[ModelRequest] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    def script(self, steps: Sequence[Step]) -> None:
        """The conversation the next agent sessions follow, step by step."""
        with self._lock:
            self._steps = list(steps)

    @property
    def requests(self) -> list[ModelRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def agent_requests(self) -> list[ModelRequest]:
        """The requests answered from the script (the agent's own turns)."""
        return [r for r in self.requests if r.step is not None]

    def close(self) -> None:
        """Stop the server."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _answer(self, model: str, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "countTokens":
            self._record(ModelRequest(model=model, method=method, body=body, step=None))
            return {"totalTokens": max(1, len(json.dumps(body)) // 4)}
        step_index: int | None = None
        if body.get("tools"):
            contents = body.get("contents") or []
            step_index = sum(
                1 for c in contents if isinstance(c, dict) and c.get("role") == "model"
            )
        self._record(ModelRequest(model=model, method=method, body=body, step=step_index))
        with self._lock:
            steps = self._steps
        if step_index is None:
            step = answer(_helper_text(body))
        else:
            step = steps[step_index] if step_index < len(steps) else answer(_DONE)
        return _response(model, step, body)

    def _record(self, request: ModelRequest) -> None:
        with self._lock:
            self._requests.append(request)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _helper_text(body: dict[str, Any]) -> str:
    # The CLI's helper calls (model routing, next-speaker and loop checks) ask for JSON of
    # a schema: the plainest value of that schema lets each of them go on quietly.
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") != "application/json":
        return "ok"
    return json.dumps(_plain_value(config.get("responseJsonSchema") or {}))


def _plain_value(schema: dict[str, Any]) -> Any:
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _plain_value(sub) for name, sub in properties.items()}
    if schema.get("enum"):
        return schema["enum"][0]
    plain: dict[str, Any] = {"string": "fake", "integer": 1, "number": 1, "boolean": False}
    return plain.get(kind, [])


def _response(model: str, step: Step, body: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [
        {"functionCall": {"name": name, "args": args}} for name, args in step.calls
    ] or [{"text": step.text}]
    prompt_tokens = max(1, len(json.dumps(body)) // 4)
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": 10,
            "totalTokenCount": prompt_tokens + 10,
        },
        "modelVersion": model,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGemini


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        match = _PATH.match(path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if match is None:
            self._send(404, "application/json", b'{"error": {"code": 404, "message": "no route"}}')
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        model, method = match.groups()
        reply = self.server.fake._answer(model, method, body if isinstance(body, dict) else {})
        data = json.dumps(reply).encode()
        if method == "streamGenerateContent" and "alt=sse" in query:
            self._send(200, "text/event-stream", b"data: " + data + b"\r\n\r\n")
        else:
            self._send(200, "application/json", data)

    def do_GET(self) -> None:
        self._send(404, "application/json", b'{"error": {"code": 404, "message": "no route"}}')

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the test reads `requests`, not a log

    def _send(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(name="fake_gemini")
def fake_gemini_fixture() -> Iterator[FakeGemini]:
    """A running FakeGemini, closed after the test."""
    fake = FakeGemini()
    yield fake
    fake.close()
