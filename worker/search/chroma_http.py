"""Calls to a Chroma server that cannot hang: chromadb's HTTP client has no timeout at all, so
a frozen or partitioned server held an upsert (and the thread running it) forever."""

from __future__ import annotations

from typing import Any

import httpx

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
"""Reading or writing one request: an upsert of a batch is a few hundred KB to the server."""
TIMEOUTS = httpx.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)


def check_heartbeat(base_url: str, timeouts: httpx.Timeout = TIMEOUTS) -> None:
    """Raise (httpx.HTTPError) unless the server answers its heartbeat within the timeouts.

    chromadb's client makes its first request while it is built, without a timeout: asking
    first keeps a server that is down from holding that request for good.
    """
    reply = httpx.get(f"{base_url}/api/v2/heartbeat", timeout=timeouts)
    reply.raise_for_status()


def bound_timeouts(client: Any) -> bool:
    """Give a chromadb HttpClient's session our timeouts; False when it has none to set.

    chromadb builds one httpx session per client with `timeout=None` and offers no setting
    for it (tests/worker/search/test_chroma_http.py fails when that changes).
    """
    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        return False
    session.timeout = TIMEOUTS
    return True
