"""A loopback fake of the Bot API (getMe, getChat, sendMessage, getUpdates) that records sends.

A stdlib ThreadingHTTPServer in a daemon thread. `sendMessage` checks what Telegram checks
(HTML parse mode: known tags only, balanced, `&` escaped; at most 4,096 characters after
parsing). `fail_next()` queues error answers (a 429 with `retry_after`, a 5xx, …) served to
the next sendMessage calls (to one chat, or any); `push_update()` queues a chat message for
getUpdates; `add_chat()` names a chat for getChat.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import msgspec
import pytest

TOKEN = "123456:test-token"
_ALLOWED_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre",
    "tg-spoiler", "span", "blockquote", "tg-emoji",
}  # fmt: skip
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")
_PATH = re.compile(r"^/bot(?P<token>[^/]+)/(?P<method>\w+)$")


class SentMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One accepted sendMessage call."""

    chat_id: str
    text: str
    parse_mode: str | None
    at: float  # time.monotonic() when it was accepted


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """A scripted error answer to the next sendMessage."""

    status: int
    description: str = "Internal Server Error"
    retry_after: int | None = None
    chat_id: str | None = None  # served only to a sendMessage to this chat; None: to any


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """One sendMessage answered with an error."""

    chat_id: str
    status: int
    description: str
    at: float


class FakeTelegram:
    """The fake server's handle: the URL, what was sent, scripted failures and updates."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.max_poll_s = 0.5
        self.foreign_reply: bytes | None = None  # set: every request gets this 200 body
        self._lock = threading.Condition()
        self._sent: list[SentMessage] = []
        self._failures: list[Failure] = []
        self._refused: list[Refusal] = []
        self._updates: list[dict[str, Any]] = []
        self._calls: list[str] = []
        self._chats: dict[str, dict[str, Any]] = {}
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    @property
    def sent(self) -> list[SentMessage]:
        """Every accepted message, oldest first."""
        with self._lock:
            return list(self._sent)

    @property
    def calls(self) -> list[str]:
        """The API method of every request, in order."""
        with self._lock:
            return list(self._calls)

    @property
    def refused(self) -> list[Refusal]:
        """Every sendMessage answered with an error, oldest first."""
        with self._lock:
            return list(self._refused)

    def fail_next(self, *failures: Failure) -> None:
        """Answer the next sendMessage calls with these errors, in order."""
        with self._lock:
            self._failures.extend(failures)

    def add_chat(self, chat_id: int, username: str) -> None:
        """A chat getChat finds by `@username` (or its id)."""
        chat = {
            "id": chat_id,
            "type": "channel",
            "title": username,
            "username": username,
            "accent_color_id": 0,  # getChat answers a ChatFullInfo, which requires these two
            "max_reaction_count": 11,
        }
        with self._lock:
            self._chats[f"@{username}"] = self._chats[str(chat_id)] = chat

    def push_update(self, chat_id: int, text: str, *, username: str | None = None) -> int:
        """Queue a text message from a chat for getUpdates; returns its update_id."""
        with self._lock:
            update_id = next(self._update_ids)
            chat: dict[str, Any] = {"id": chat_id, "type": "private" if chat_id > 0 else "group"}
            if username:
                chat["username"] = username
            self._updates.append(
                {
                    "update_id": update_id,
                    "message": {
                        "message_id": next(self._message_ids),
                        "date": int(time.time()),
                        "chat": chat,
                        "from": {"id": abs(chat_id), "is_bot": False, "first_name": "Dev"},
                        "text": text,
                    },
                }
            )
            self._lock.notify_all()
            return update_id

    def wait_for_sent(self, count: int, timeout_s: float = 10.0) -> list[SentMessage]:
        """Block until at least `count` messages were accepted; return them all."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._sent) >= count, timeout_s):
                raise TimeoutError(f"fake Telegram got {len(self._sent)} of {count} messages")
            return list(self._sent)

    def close(self) -> None:
        """Stop the server."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    # -- API methods (called on the server's threads) -------------------------------------

    def answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self._calls.append(method)
        if method == "getMe":
            return 200, _ok(
                {"id": 42, "is_bot": True, "first_name": "memq", "username": "memq_bot"}
            )
        if method == "getChat":
            with self._lock:
                chat = self._chats.get(str(params.get("chat_id", "")))
            if chat is None:
                return 400, {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: chat not found",
                }
            return 200, _ok(chat)
        if method == "sendMessage":
            return self._send_message(params)
        if method == "getUpdates":
            return self._get_updates(params)
        return 404, {"ok": False, "error_code": 404, "description": "Not Found"}

    def _send_message(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        chat_id = str(params.get("chat_id", ""))
        text = str(params.get("text", ""))
        parse_mode = params.get("parse_mode")
        with self._lock:
            due = (n for n, f in enumerate(self._failures) if f.chat_id in (None, chat_id))
            failure = self._failures.pop(found) if (found := next(due, None)) is not None else None
        if failure is not None:
            return self._refuse(chat_id, failure.status, failure.description, failure.retry_after)
        problem = check_html(text) if parse_mode == "HTML" else None
        if problem is None and _visible_length(text, parse_mode) > 4096:
            problem = "Bad Request: message is too long"
        if not chat_id or not text:
            problem = "Bad Request: chat_id and text are required"
        if problem is not None:
            return self._refuse(chat_id, 400, problem, None)
        with self._lock:
            self._sent.append(
                SentMessage(chat_id=chat_id, text=text, parse_mode=parse_mode, at=time.monotonic())
            )
            self._lock.notify_all()
            message_id = next(self._message_ids)
        return 200, _ok(
            {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": {
                    "id": int(chat_id) if chat_id.lstrip("-").isdigit() else 0,
                    "type": "private",
                },
                "text": text,
            }
        )

    def _refuse(
        self, chat_id: str, status: int, description: str, retry_after: int | None
    ) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self._refused.append(
                Refusal(
                    chat_id=chat_id, status=status, description=description, at=time.monotonic()
                )
            )
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return status, body

    def _get_updates(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        wait_s = min(float(params.get("timeout") or 0), self.max_poll_s)
        with self._lock:
            # Asking from `offset` confirms (forgets) every update before it, as Telegram does.
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self._lock.wait_for(lambda: bool(self._updates), wait_s)
            return 200, _ok(list(self._updates))


def check_html(text: str) -> str | None:
    """Telegram's complaint about HTML-mode text, or None when it would be accepted."""
    checker = _TagChecker()
    try:
        checker.feed(text)
        checker.close()
    except ValueError as e:
        return f"Bad Request: can't parse entities: {e}"
    if checker.open_tags:
        return f"Bad Request: can't parse entities: unclosed <{checker.open_tags[-1]}>"
    stray = re.search(r"&(?!(?:lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);)", text)
    if stray:
        return "Bad Request: can't parse entities: unescaped '&'"
    if re.search(r"<(?![a-zA-Z/])", text):
        return "Bad Request: can't parse entities: unescaped '<'"
    return None


class _TagChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.open_tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED_TAGS:
            raise ValueError(f"unsupported start tag <{tag}>")
        self.open_tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open_tags or self.open_tags[-1] != tag:
            raise ValueError(f"unexpected end tag </{tag}>")
        self.open_tags.pop()


def _visible_length(text: str, parse_mode: str | None) -> int:
    if parse_mode == "HTML":
        text = re.sub(r"<[^>]*>", "", text)
        text = _ENTITY.sub("x", text)
    return len(text.encode("utf-16-le")) // 2


def _ok(result: Any) -> dict[str, Any]:
    return {"ok": True, "result": result}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeTelegram

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (a cancelled long poll) leaves a broken pipe


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        match = _PATH.match(self.path.split("?", 1)[0])
        foreign = self.server.fake.foreign_reply
        if foreign is not None:  # another server answers: not the Bot API's envelope
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(foreign)))
            self.end_headers()
            self.wfile.write(foreign)
            return
        if match is None or match["token"] != self.server.fake.token:
            status, body = 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        else:
            status, body = self.server.fake.answer(match["method"], self._params())
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _params(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Type", "").startswith("application/json"):
            loaded: dict[str, Any] = json.loads(raw or b"{}")
            return loaded
        query = raw.decode() or (self.path.split("?", 1)[1] if "?" in self.path else "")
        return {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


@pytest.fixture(name="fake_telegram")
def fake_telegram_fixture() -> Iterator[FakeTelegram]:
    """A fresh fake Bot API server per test."""
    fake = FakeTelegram()
    yield fake
    fake.close()
