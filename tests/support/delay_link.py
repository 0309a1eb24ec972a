"""A TCP relay on loopback that delivers every chunk `delay_s` late, in both directions.

Used as a replica's link to its primary: the replica then runs `delay_s` behind, as over a
slow network, and `sever()` drops whatever the link still holds, as a dying host would.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque

from tests.support.ports import free_port


class DelayLink:
    """Listens on `port` and relays each connection to 127.0.0.1:`target_port`, late."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self.target_port = target_port
        self.delay_s = delay_s
        self.port = free_port()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._sockets: list[socket.socket] = [self._server]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def sever(self) -> None:
        """Close every connection at once; chunks not yet delivered are lost."""
        self._closed.set()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                downstream, _ = self._server.accept()
            except OSError:
                return  # severed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                downstream.close()  # the primary is gone: the replica retries, as it would
                continue
            self._sockets += [downstream, upstream]
            for src, dst in ((upstream, downstream), (downstream, upstream)):
                held: deque[tuple[float, bytes]] = deque()
                ready = threading.Condition()
                threading.Thread(target=self._read, args=(src, held, ready), daemon=True).start()
                threading.Thread(target=self._send, args=(dst, held, ready), daemon=True).start()

    def _read(
        self, src: socket.socket, held: deque[tuple[float, bytes]], ready: threading.Condition
    ) -> None:
        while not self._closed.is_set():
            try:
                chunk = src.recv(1 << 16)
            except OSError:
                chunk = b""
            with ready:
                held.append((time.monotonic() + self.delay_s, chunk))
                ready.notify()
            if not chunk:
                return

    def _send(
        self, dst: socket.socket, held: deque[tuple[float, bytes]], ready: threading.Condition
    ) -> None:
        while not self._closed.is_set():
            with ready:
                while not held and not self._closed.is_set():
                    ready.wait(0.1)
                if self._closed.is_set():
                    return
                due, chunk = held.popleft()
            time.sleep(max(0.0, due - time.monotonic()))
            if self._closed.is_set():
                return
            try:
                if not chunk:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(chunk)
            except OSError:
                return
