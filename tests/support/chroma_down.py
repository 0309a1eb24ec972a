"""Loopback stand-ins for a Chroma server that is down: one that answers 500, a closed port."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Failing(BaseHTTPRequestHandler):
    def _fail(self) -> None:
        body = b'{"error":"InternalError","message":"chroma is down"}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.requests += 1  # type: ignore[attr-defined]

    do_GET = do_POST = do_PUT = do_DELETE = _fail

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def failing_chroma() -> Iterator[tuple[str, ThreadingHTTPServer]]:
    """An HTTP server on 127.0.0.1 that answers every request with 500; yields (url, server)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    server.requests = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
