"""Bounded connections for uvicorn: a cap under the open-file limit, and an idle timeout.

uvicorn closes an idle keep-alive connection only after a response, so a client that
connects and never sends a request holds a file descriptor for good; past the process's
open-file limit (1,024 by default) every new connection fails. `capped_http_protocol` is
uvicorn's own HTTP/1.1 protocol (httptools, from uvicorn[standard]) with both bounds; the
test that opens real idle connections fails the day uvicorn's protocol changes under it.
"""

from __future__ import annotations

import asyncio
import resource
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# A refused connection is answered, half-closed, then closed after this: a request the client
# sent meanwhile is read and dropped, so the client reads the refusal, not a reset. At most
# a quarter of the cap linger at once (each holds a descriptor); past that they close at once.
_LINGER_S = 1.0


def connection_cap(wanted: int) -> int:
    """`wanted`, but at most half the soft open-file limit (the rest is for the listening
    socket, Redis, the spool, the store and refused connections lingering)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft // 2))


def refusal_response(message: str) -> bytes:
    """A complete `503` HTTP/1.1 response whose body is `message` on one line."""
    body = f"{' '.join(message.split())}\n".encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def capped_http_protocol(
    *, max_connections: int, idle_timeout_s: float, refusal: bytes
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol that answers `refusal` past `max_connections` open
    connections, and closes one that sends no request within `idle_timeout_s`."""

    max_lingering = max(1, max_connections // 4)

    class CappedHttpProtocol(HttpToolsProtocol):
        refused = False
        lingering: ClassVar[int] = 0  # refused connections of this server not yet closed

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= max_connections:
                self.refused = True
                transport.write(refusal)
                if CappedHttpProtocol.lingering >= max_lingering or not transport.can_write_eof():
                    transport.close()
                    return
                CappedHttpProtocol.lingering += 1
                transport.write_eof()
                self.loop.call_later(_LINGER_S, self._end_refusal, transport)
                return
            super().connection_made(transport)
            # Armed as uvicorn arms it after a response; the first bytes of a request disarm it.
            self.timeout_keep_alive_task = self.loop.call_later(
                idle_timeout_s, self.timeout_keep_alive_handler
            )

        def _end_refusal(self, transport: asyncio.Transport) -> None:
            CappedHttpProtocol.lingering -= 1
            transport.close()

        def data_received(self, data: bytes) -> None:
            if not self.refused:
                super().data_received(data)

        def eof_received(self) -> None:
            if not self.refused:
                super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            if not self.refused:
                super().connection_lost(exc)

    return CappedHttpProtocol
