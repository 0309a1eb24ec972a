"""A deterministic, instant embedding function for tests: hashed bag of words, L2-normalised."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

DIMENSIONS = 64
_WORD = re.compile(r"[a-z0-9]+")


class HashEmbeddingFunction(EmbeddingFunction[Documents]):
    """Texts sharing words get similar vectors; no model, no network, microseconds per text."""

    def __init__(self, dimensions: int = DIMENSIONS) -> None:
        self.dimensions = dimensions
        self.calls = 0

    def __call__(self, input: Documents) -> Embeddings:
        self.calls += 1
        out = []
        for text in input:
            v = np.zeros(self.dimensions, dtype=np.float32)
            for word in _WORD.findall(text.lower()) or [""]:
                h = hashlib.blake2b(word.encode(), digest_size=8).digest()
                v[int.from_bytes(h[:4], "little") % self.dimensions] += 1.0 if h[4] & 1 else -1.0
            norm = float(np.linalg.norm(v))
            out.append(v / norm if norm else np.full(self.dimensions, 1.0, dtype=np.float32))
        return out

    @staticmethod
    def name() -> str:
        return "memq-test-hash"

    def default_space(self) -> Space:
        return "cosine"

    def get_config(self) -> dict[str, Any]:
        return {"dimensions": self.dimensions}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashEmbeddingFunction:
        return HashEmbeddingFunction(int(config.get("dimensions", DIMENSIONS)))


register_embedding_function(HashEmbeddingFunction)


def make_hash_embedding() -> HashEmbeddingFunction:
    """The MEMQ_EMBEDDING plug-in entry point tests use (`tests.support.embeddings:make_…`)."""
    return HashEmbeddingFunction()
