"""A scripted Anthropic Messages API for Claude Code itself (not memq's observer): tool use.

The agent's main conversation (a request that offers the `Bash` tool) is answered from the
script: the Nth request of a conversation (N-1 assistant messages already in it) gets the
Nth step, a tool call or the final text. Any other request (titles, summaries of the agent's
own) gets a short text. Every request is recorded for assertions.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec


class ToolUse(msgspec.Struct, frozen=True):
    """A step: the model calls `name` with `input`."""

    name: str
    input: dict[str, Any]


class Text(msgspec.Struct, frozen=True):
    """A step: the model answers with text and ends its turn."""

    text: str


Step = ToolUse | Text


class AnthropicAgentModel:
    """The server's handle: set `script`, read `requests`, `close()`."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.model = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def main_requests(self) -> list[dict[str, Any]]:
        """The requests of the agent's main conversations (those that offer tools)."""
        with self._lock:
            return [r for r in self.requests if _offers_bash(r)]

    def close(self) -> None:
        """Stop the server."""
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The content blocks and stop reason for one request."""
        with self._lock:
            self.requests.append(body)
            script = list(self.script)
        if not _offers_bash(body):
            return [{"type": "text", "text": "ok"}], "end_turn"
        turn = sum(m.get("role") == "assistant" for m in body.get("messages", []))
        step = script[turn] if turn < len(script) else Text("Done.")
        if isinstance(step, Text):
            return [{"type": "text", "text": step.text}], "end_turn"
        use_id = f"toolu_{next(self._ids):04d}{threading.get_ident() % 10_000:04d}"
        return [
            {"type": "tool_use", "id": use_id, "name": step.name, "input": step.input}
        ], "tool_use"


def _offers_bash(body: dict[str, Any]) -> bool:
    return any(isinstance(t, dict) and t.get("name") == "Bash" for t in body.get("tools") or [])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if "count_tokens" in self.path:
            return self._json({"input_tokens": 100})
        if not self.path.startswith("/v1/messages"):
            return self._json({"type": "error", "error": {"type": "not_found_error",
                               "message": self.path}}, 404)  # fmt: skip
        model: AnthropicAgentModel = self.server.model  # type: ignore[attr-defined]
        blocks, stop = model.answer(body)
        message = {
            "id": f"msg_{next(model._ids)}", "type": "message", "role": "assistant",
            "model": body.get("model", "fake"), "content": blocks, "stop_reason": stop,
            "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 20},
        }  # fmt: skip
        if not body.get("stream"):
            return self._json(message)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in _stream_events(message):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        self._json({"data": [], "has_more": False})

    def _json(self, payload: dict[str, Any], status: int = 200) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def _stream_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    start = {**message, "content": [], "stop_reason": None,
             "usage": {"input_tokens": 100, "output_tokens": 1}}  # fmt: skip
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty = {"type": "text", "text": ""}
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": empty}  # fmt: skip
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": empty}  # fmt: skip
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": 20}}  # fmt: skip
    yield "message_stop", {"type": "message_stop"}
