"""The command hook's fast path: hand the payload to a running `memq agent` on loopback.

A hook process that imports memq's preparation (redaction, msgspec, settings) spends ~85 ms
importing before it does anything. When `memq agent` runs on this machine (as under
`memq up`), the hook instead posts the raw payload to it and exits once the agent has
written the prepared events to the spool (fsynced): as durable as publishing it itself,
and published from there within a flush. This module imports only `socket` and `zlib`.
Anything unexpected (no agent, another memq's agent, a refusal, a slow answer) returns
None and the hook records the event the usual way.
"""

from __future__ import annotations

import socket
import zlib
from collections.abc import Mapping

RELAY_QUERY = "durable=1"
TARGET_HEADER = "x-memq-target"
_TARGET_VARIABLES = ("MEMQ_REDIS_URL", "MEMQ_DATA_DIR", "MEMQ_PREFIX", "MEMQ_PROJECT")
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_CONNECT_S = 0.05
# Past these the hook records the event itself and still fits its budget (1 s; 2.5 s for a
# SessionStart, whose answer is the context the agent reads from the store).
_ANSWER_S = 0.4
_START_ANSWER_S = 1.5
_MAX_ANSWER_BYTES = 1 << 20


def target(environ: Mapping[str, str]) -> str:
    """Which memq an event is for, as the raw settings that choose its Redis, data dir and
    project name say (a checksum: the Redis URL may hold a password)."""
    raw = "\n".join(environ.get(name, "") for name in _TARGET_VARIABLES)
    return f"{zlib.crc32(raw.encode()):08x}"


def relay(agent: str, raw: bytes, environ: Mapping[str, str]) -> bytes | None:
    """The agent's answer (SessionStart: the context) once it holds the events durably;
    None when the hook must record them itself."""
    if environ.get("MEMQ_CONFIG"):
        return None  # settings in a TOML file: only the full path reads them
    host = environ.get("MEMQ_AGENT_HOST") or "127.0.0.1"
    port = environ.get("MEMQ_AGENT_PORT") or "8766"
    if host not in _LOOPBACK or not port.isdigit():
        return None
    lines = [
        f"POST /hooks/{agent}?{RELAY_QUERY} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(raw)}",
        "Connection: close",
        f"X-Memq-Target: {target(environ)}",
    ]
    token = environ.get("MEMQ_AGENT_TOKEN")
    if token:
        lines.append(f"Authorization: Bearer {token}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + raw
    try:
        with socket.create_connection((host, int(port)), timeout=_CONNECT_S) as sock:
            sock.settimeout(_START_ANSWER_S if b'"SessionStart"' in raw else _ANSWER_S)
            sock.sendall(request)
            answer = _read_answer(sock)
    except OSError:  # nothing listens, a reset, a timeout
        return None
    head, _, body = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200 "):
        return None
    length = next(
        (
            line.split(b":", 1)[1].strip()
            for line in head.split(b"\r\n")[1:]
            if line.lower().startswith(b"content-length:")
        ),
        None,
    )
    if length is None or not length.isdigit() or int(length) != len(body):
        return None  # cut short: not known to be durable
    return body


def _read_answer(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= _MAX_ANSWER_BYTES:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
