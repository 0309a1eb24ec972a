"""The real embedding model for the few tests that need it: loaded once per test process."""

from __future__ import annotations

import functools
import socket
from typing import Any

import pytest

from worker.search.embeddings import MiniLmEmbeddingFunction


def _no_network(*args: Any, **kwargs: Any) -> None:
    raise OSError("network access attempted while loading the embedding model")


@functools.cache
def shared_minilm() -> MiniLmEmbeddingFunction:
    """all-MiniLM-L6-v2, loaded (about a second) with every socket connect refused."""
    ef = MiniLmEmbeddingFunction()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _no_network)
        ef(["warm up"])
    return ef
