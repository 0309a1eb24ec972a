"""A Chroma server's client never waits forever: it asks the heartbeat first, with timeouts,
and its requests carry them (chromadb's own client has none)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.chroma_server import ChromaServer
from tests.support.embeddings import HashEmbeddingFunction
from tests.support.ingest import black_hole
from worker.search.chroma_http import CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S, check_heartbeat
from worker.search.vector_index import ChromaTarget, VectorIndex, chroma_target
from worker.settings import load_settings


@pytest.fixture(name="server", scope="module")
def _fix_server() -> Iterator[ChromaServer]:
    server = ChromaServer().start()
    yield server
    server.stop()


def target_of(url: str) -> ChromaTarget:
    found = chroma_target(load_settings({"MEMQ_CHROMA": url}))
    assert found is not None
    return found


def test_the_client_of_a_chroma_server_carries_timeouts(server: ChromaServer) -> None:
    index = VectorIndex.open(target_of(server.url), "memq", HashEmbeddingFunction())
    # chromadb keeps its httpx session here; bound_timeouts set it (False when it moved).
    session = index.client._server._session  # type: ignore[attr-defined]
    assert isinstance(session, httpx.Client)
    assert session.timeout == httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    assert target_of(server.url).url == server.url


def test_a_frozen_server_fails_the_heartbeat_instead_of_holding_it(server: ChromaServer) -> None:
    check_heartbeat(server.url)
    assert server.proc is not None
    server.proc.send_signal(signal.SIGSTOP)  # it accepts connections and never answers
    try:
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            check_heartbeat(server.url, httpx.Timeout(0.5))
        took = time.monotonic() - started
    finally:
        server.proc.send_signal(signal.SIGCONT)
    assert took < 5
    check_heartbeat(server.url)


def test_a_silent_endpoint_times_out_on_the_heartbeat() -> None:
    with black_hole() as url, pytest.raises(httpx.TimeoutException):
        check_heartbeat(url.replace("redis://", "http://").removesuffix("/0"), httpx.Timeout(0.3))
