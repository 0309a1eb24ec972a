"""A loopback fake of the Anthropic Messages and OpenAI Chat Completions APIs; scripted replies.

It runs a stdlib ThreadingHTTPServer in a daemon thread, so the test process and worker
subprocesses can both talk to it over HTTP. Anthropic clients use `url` as base_url, OpenAI
clients `openai_url` (`url + "/v1"`). Replies queued with `script()` are served first, in
order; after that `responder` answers (by default `deterministic_reply`, an instant observer).
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest

from pipeline.prompting.framing import escape_xml_text
from tests.support.fake_sse import anthropic_sse

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"

_SESSION_ELEMENT = re.compile(
    r"<observed_from_primary_session>(.*?)</observed_from_primary_session>", re.S
)
# build_summary_prompt puts the `<summary>` skeleton on a line of its own; observation prompts
# cannot contain it because every tool value in them is XML-escaped.
_SUMMARY_SKELETON = re.compile(r"^<summary>\s*$", re.M)
_TAG = re.compile(r"<[^>]*>")
_TITLE_PARAMETER_CHARS = 40


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """One scripted answer: text with status 200, or an error in the API's own envelope.

    Token counts default to about four characters a token; `input_tokens` is the whole prompt
    including `cached_input_tokens` (cache reads) and `cache_write_tokens` (Anthropic only).
    """

    text: str = ""
    status: int = 200
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    error_type: str | None = None
    error_message: str | None = None
    error_code: str | None = None  # OpenAI's `code`; defaults to error_type
    body: str | None = None  # a raw body sent as it is (e.g. a proxy's HTML error page)
    delay_s: float = 0
    input_tokens: int | None = None
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int | None = None
    model: str | None = None  # the model the reply names; defaults to the requested one
    drip_s: float = 0  # seconds between the body's bytes (a reply that drips), after the headers
    # an error that echoes the request's credentials (`x-api-key` / `authorization`) in its message
    echo_credentials: bool = False


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request the fake received, decoded for assertions."""

    provider: str  # "anthropic" or "openai"
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]
    system: str  # the system prompt's text
    user: str  # the text of the last user message
    messages: list[dict[str, Any]]  # every message as sent
    received_at: float


class FakeObserver:
    """The fake server's handle: script replies, inspect requests, hold replies, close."""

    def __init__(self) -> None:
        self.responder: Callable[[RecordedRequest], Reply] = deterministic_reply
        self._lock = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque()
        self._released = threading.Event()
        self._released.set()
        self._closed = threading.Event()  # stops a dripping reply
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    @property
    def openai_url(self) -> str:
        """The base_url for OpenAI clients (`url` + "/v1")."""
        return self.url + "/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def script(self, *replies: Reply) -> None:
        """Queue replies, served in order before the responder is asked."""
        with self._lock:
            self._script.extend(replies)

    def hold(self) -> None:
        """From now on every reply waits until `release()` (requests are still recorded)."""
        self._released.clear()

    def release(self) -> None:
        """Let held replies go."""
        self._released.set()

    def wait_for_requests(self, count: int, timeout_s: float = 10.0) -> list[RecordedRequest]:
        """Block until at least `count` requests have arrived; return them."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= count, timeout_s):
                got = len(self._requests)
                raise TimeoutError(f"fake observer got {got} of {count} requests in {timeout_s}s")
            return list(self._requests)

    def reset(self) -> None:
        """Release held replies, forget requests and scripted replies, restore the responder."""
        self._released.set()
        with self._lock:
            self._requests.clear()
            self._script.clear()
        self.responder = deterministic_reply

    def close(self) -> None:
        """Release held replies and stop the server."""
        self._released.set()
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()
            scripted = self._script.popleft() if self._script else None
        try:
            reply = scripted if scripted is not None else self.responder(request)
        except Exception as e:  # a broken responder must show up in the test, not hang it
            reply = Reply(status=500, error_type="fake_responder_error", error_message=repr(e))
        self._released.wait()
        if reply.delay_s:
            time.sleep(reply.delay_s)
        return reply

    def _next_id(self) -> int:
        return next(self._ids)


def deterministic_reply(request: RecordedRequest) -> Reply:
    """An instant observer: a `<summary>` when asked for one, else one observation per tool call.

    Everything derives from the last user message, minus each call's timestamp: the same tool
    call (name, directory, parameters, outcome) always yields the same observation.
    """
    user = request.user
    if _SUMMARY_SKELETON.search(user):
        return Reply(text=_summary(user))
    calls = _SESSION_ELEMENT.findall(user)
    return Reply(text="\n".join(_observation(call) for call in calls))


def slow_observer(
    low_s: float, high_s: float, responder: Callable[[RecordedRequest], Reply] = deterministic_reply
) -> Callable[[RecordedRequest], Reply]:
    """`responder`, answering after a uniform `low_s`..`high_s` (a real provider takes 1-2 s)."""

    def answer(request: RecordedRequest) -> Reply:
        reply = responder(request)
        return msgspec.structs.replace(reply, delay_s=reply.delay_s + random.uniform(low_s, high_s))

    return answer


def _observation(element: str) -> str:
    tool = _plain(_field(element, "what_happened")) or "tool"
    parameters = _plain(_field(element, "parameters"))
    outcome = _plain(_field(element, "outcome"))
    cwd = _plain(_field(element, "working_directory"))
    digest = _digest(tool, cwd, parameters, outcome)
    title = f"{tool}: {parameters[:_TITLE_PARAMETER_CHARS]}".rstrip()
    return "\n".join(
        [
            "<observation>",
            "  <type>discovery</type>",
            f"  <title>{escape_xml_text(title)}</title>",
            f"  <subtitle>{escape_xml_text(tool)} call {digest[:8]}</subtitle>",
            "  <facts>",
            f"    <fact>{escape_xml_text(tool)} printed {len(outcome)} characters</fact>",
            "  </facts>",
            f"  <narrative>The {escape_xml_text(tool)} call with fingerprint {digest} "
            "was observed and recorded.</narrative>",
            "  <concepts>",
            "    <concept>how-it-works</concept>",
            "  </concepts>",
            "  <files_read>",
            "  </files_read>",
            "  <files_modified>",
            "  </files_modified>",
            "</observation>",
        ]
    )


def _summary(user: str) -> str:
    request = _plain(_field(user, "user_request")) or "continue the session's work"
    message = _plain(_field(user, "last_assistant_message"))
    digest = _digest(user)
    fields = {
        "request": request,
        "investigated": f"the tool calls up to checkpoint {digest[:8]}",
        "learned": message[:120] or "nothing new since the last checkpoint",
        "completed": f"the work recorded up to checkpoint {digest[:8]}",
        "next_steps": "continue from the last assistant message",
    }
    lines = [f"  <{tag}>{escape_xml_text(text)}</{tag}>" for tag, text in fields.items()]
    return "\n".join(["<summary>", *lines, "</summary>"])


def _field(element: str, name: str) -> str:
    match = re.search(rf"<{name}\b[^>]*>(.*?)</{name}>", element, re.S)
    return match[1] if match else ""


def _plain(escaped: str) -> str:
    # Back to the tool's own text: drop markup (e.g. an elision marker), undo the escaping.
    return " ".join(html.unescape(_TAG.sub(" ", escaped)).split())


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


# -- HTTP -------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeObserver

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, kill -9) leaves a broken pipe; that is expected.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; without TCP_NODELAY, Nagle plus delayed ACKs
    # add 40 ms to every keep-alive request.
    disable_nagle_algorithm = True

    _drip_s: float = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        provider = {ANTHROPIC_PATH: "anthropic", OPENAI_PATH: "openai"}.get(path)
        if provider is None:
            self._send(404, {"error": {"message": f"no route {path}", "type": "not_found"}}, {})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        request = _record(provider, path, dict(self.headers.items()), body)
        fake = self.server.fake
        reply = fake._answer(request)
        headers = dict(reply.headers)
        self._drip_s = reply.drip_s
        if reply.echo_credentials:
            sent = request.headers.get("x-api-key") or request.headers.get("authorization")
            echoed = f"{reply.error_message or 'bad request'}; request headers: {sent}"
            reply = msgspec.structs.replace(reply, error_message=echoed)
        if reply.body is not None:
            self._send_raw(reply.status, reply.body.encode(), headers, "text/html")
        elif reply.status >= 400:
            self._send(reply.status, _error_body(provider, reply), headers)
        elif provider == "anthropic" and request.body.get("stream"):
            # Claude Code (the claude-code observer's CLI) always streams.
            message = _anthropic_body(request, reply, fake._next_id())
            self._send_raw(200, anthropic_sse(message), headers, "text/event-stream")
        elif provider == "anthropic":
            self._send(200, _anthropic_body(request, reply, fake._next_id()), headers)
        else:
            self._send(200, _openai_body(request, reply, fake._next_id()), headers)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers, "application/json")

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str], kind: str) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if not self._drip_s:
            self.wfile.write(data)
            return
        self.wfile.flush()
        for i in range(len(data)):
            if self.server.fake._closed.is_set():
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            time.sleep(self._drip_s)


def _record(provider: str, path: str, headers: dict[str, str], body: Any) -> RecordedRequest:
    body = body if isinstance(body, dict) else {}
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    if provider == "anthropic":
        system = _text_of(body.get("system", ""))
    else:
        system = "\n".join(
            _text_of(m.get("content")) for m in messages if m.get("role") == "system"
        )
    users = [m for m in messages if m.get("role") == "user"]
    return RecordedRequest(
        provider=provider,
        path=path,
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
        system=system,
        user=_text_of(users[-1].get("content")) if users else "",
        messages=messages,
        received_at=time.time(),
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _tokens(request: RecordedRequest, reply: Reply) -> tuple[int, int]:
    prompt_chars = len(request.system) + sum(
        len(_text_of(m.get("content"))) for m in request.messages
    )
    prompt = reply.input_tokens if reply.input_tokens is not None else max(1, prompt_chars // 4)
    output = reply.output_tokens if reply.output_tokens is not None else len(reply.text) // 4
    return prompt, output


def _anthropic_body(request: RecordedRequest, reply: Reply, n: int) -> dict[str, Any]:
    prompt, output = _tokens(request, reply)
    uncached = max(0, prompt - reply.cached_input_tokens - reply.cache_write_tokens)
    return {
        "id": f"msg_fake{n:06d}",
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.body.get("model", "fake"),
        "content": [{"type": "text", "text": reply.text}] if reply.text else [],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": uncached,
            "output_tokens": output,
            "cache_read_input_tokens": reply.cached_input_tokens,
            "cache_creation_input_tokens": reply.cache_write_tokens,
        },
    }


def _openai_body(request: RecordedRequest, reply: Reply, n: int) -> dict[str, Any]:
    prompt, output = _tokens(request, reply)
    return {
        "id": f"chatcmpl-fake{n:06d}",
        "object": "chat.completion",
        "created": int(request.received_at),
        "model": reply.model or request.body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": reply.cached_input_tokens},
        },
    }


def _error_body(provider: str, reply: Reply) -> dict[str, Any]:
    message = reply.error_message or f"fake error {reply.status}"
    kind = reply.error_type or ("api_error" if reply.status >= 500 else "invalid_request_error")
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": reply.error_code or kind}}


@pytest.fixture(name="fake_observer")
def fake_observer_fixture() -> Iterator[FakeObserver]:
    """A running FakeObserver, closed after the test."""
    fake = FakeObserver()
    yield fake
    fake.close()
