"""The UI's gate: the MEMQ_UI_TOKEN rule, loopback Host names without it, security headers."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl, quote, unquote, urlencode

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worker.http_serving import is_loopback_host_header

COOKIE = "memq_ui_token"
_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
        b" img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class Guard:
    """ASGI middleware: every request needs the token when one is set.

    The token comes as `Authorization: Bearer …`, as `?token=…` (answered with a cookie and a
    redirect to the same URL without it, so it leaves the address bar), or as that cookie.
    Without a token the UI only listens on loopback, and only loopback Host names are
    served, so a web page cannot reach it through DNS rebinding.
    """

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.token is None:
            if not is_loopback_host_header(headers.get("host", "")):
                await _plain(send, 421, "This UI answers on localhost only.")
                return
        else:
            query = dict(parse_qsl(scope.get("query_string", b"").decode()))
            if "token" in query:
                if self._is_token(query["token"]):
                    await self._redirect_with_cookie(scope, query, send)
                else:
                    await _plain(send, 401, "Wrong token.")
                return
            if not self._is_token(_bearer(headers) or _cookie(headers)):
                await _plain(send, 401, "This UI needs its token (MEMQ_UI_TOKEN).", bearer=True)
                return
        await self.app(scope, receive, _with_security_headers(send))

    def _is_token(self, offered: str | None) -> bool:
        return (
            self.token is not None
            and offered is not None
            and hmac.compare_digest(offered.encode(), self.token)
        )

    async def _redirect_with_cookie(self, scope: Scope, query: dict[str, str], send: Send) -> None:
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        # One leading "/" only: "//evil.example/x" would be a protocol-relative, off-site URL.
        location = "/" + quote(scope.get("path", "/").lstrip("/")) + (f"?{rest}" if rest else "")
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        value = quote(query["token"], safe="")
        cookie = f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{secure}"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode()),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                    *_SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _with_security_headers(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *_SECURITY_HEADERS]}
        await send(message)

    return wrapped


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _cookie(headers: Headers) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return unquote(value)
    return None


async def _plain(send: Send, status: int, text: str, *, bearer: bool = False) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *_SECURITY_HEADERS,
    ]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer realm="memq"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
