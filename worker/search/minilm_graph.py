"""A BERT sentence encoder (all-MiniLM-L6-v2) as an in-memory ONNX graph built from safetensors."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization appears in 17; every op used here exists there
OUTPUT = "sentence_embedding"
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


class BertConfig(msgspec.Struct, frozen=True):
    """The config.json fields the graph needs."""

    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    layer_norm_eps: float = 1e-12


def read_config(path: Path) -> BertConfig:
    """Read a Hugging Face BERT config.json."""
    return msgspec.json.decode(path.read_bytes(), type=BertConfig, strict=False)


def read_safetensors(path: Path) -> dict[str, NDArray[np.generic]]:
    """Every tensor of a .safetensors file (8-byte header size, JSON header, raw data)."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    data = memoryview(raw)[8 + size :]
    tensors: dict[str, NDArray[np.generic]] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        flat = np.frombuffer(data[start:end], dtype=_DTYPES[spec["dtype"]])
        tensors[name] = flat.reshape(spec["shape"])
    return tensors


class _Graph:
    """Collects nodes and initializers; each helper returns the name of its output."""

    def __init__(self, weights: Mapping[str, NDArray[np.generic]]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._n = 0

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, value: NDArray[np.generic] | float | list[int], name: str = "") -> str:
        self._n += 1
        name = name or f"const_{self._n}"
        if isinstance(value, float):
            arr: NDArray[np.generic] = np.array(value, dtype=np.float32)
        elif isinstance(value, list):
            arr = np.array(value, dtype=np.int64)
        else:
            arr = value
        self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    def weight(self, name: str, *, transpose: bool = False) -> str:
        arr = np.asarray(self.weights[name], dtype=np.float32)
        return self.const(np.ascontiguousarray(arr.T if transpose else arr), name)

    def linear(self, x: str, prefix: str) -> str:
        product = self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True))
        return self.op("Add", product, self.weight(f"{prefix}.bias"))

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=eps,
        )


def build_graph(weights: Mapping[str, NDArray[np.generic]], config: BertConfig) -> onnx.ModelProto:
    """BERT encoder + attention-masked mean pooling + L2 normalisation, as sentence-transformers.

    Inputs `input_ids`, `attention_mask`, `token_type_ids` (int64, batch by tokens); output
    `sentence_embedding` (float32, batch by hidden size).
    """
    g = _Graph(weights)
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    eps = config.layer_norm_eps

    seq_len = g.op("Gather", g.op("Shape", "input_ids"), g.const(np.array(1, dtype=np.int64)))
    positions = g.op(
        "Range", g.const(np.array(0, dtype=np.int64)), seq_len, g.const(np.array(1, np.int64))
    )
    x = g.op(
        "Add",
        g.op(
            "Add",
            g.op("Gather", g.weight("embeddings.word_embeddings.weight"), "input_ids"),
            g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions),
        ),
        g.op("Gather", g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"),
    )
    x = g.layer_norm(x, "embeddings.LayerNorm", eps)

    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    # Padding gets a large negative score, so softmax gives it no weight.
    blocked = g.op("Mul", g.op("Sub", g.const(1.0), mask), g.const(-1e9))
    blocked = g.op("Unsqueeze", blocked, g.const([1, 2]))
    split = g.const([0, 0, heads, head_dim])
    merge = g.const([0, 0, config.hidden_size])
    scale = g.const(1.0 / math.sqrt(head_dim))

    for i in range(config.num_hidden_layers):
        p = f"encoder.layer.{i}"
        q, k, v = (
            g.op("Reshape", g.linear(x, f"{p}.attention.self.{m}"), split)
            for m in ("query", "key", "value")
        )
        scores = g.op(
            "MatMul",
            g.op("Transpose", q, perm=[0, 2, 1, 3]),
            g.op("Transpose", k, perm=[0, 2, 3, 1]),
        )
        scores = g.op("Add", g.op("Mul", scores, scale), blocked)
        attended = g.op(
            "MatMul", g.op("Softmax", scores, axis=-1), g.op("Transpose", v, perm=[0, 2, 1, 3])
        )
        attended = g.op("Reshape", g.op("Transpose", attended, perm=[0, 2, 1, 3]), merge)
        attended = g.linear(attended, f"{p}.attention.output.dense")
        x = g.layer_norm(g.op("Add", attended, x), f"{p}.attention.output.LayerNorm", eps)
        inner = g.linear(x, f"{p}.intermediate.dense")
        # Exact GELU (erf form), as BERT was trained with, in the shape onnxruntime fuses.
        erf = g.op("Erf", g.op("Div", inner, g.const(math.sqrt(2.0))))
        gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", erf, g.const(1.0))), g.const(0.5))
        out = g.linear(gelu, f"{p}.output.dense")
        x = g.layer_norm(g.op("Add", out, x), f"{p}.output.LayerNorm", eps)

    token_mask = g.op("Unsqueeze", mask, g.const([2]))
    axis1 = g.const([1])
    summed = g.op("ReduceSum", g.op("Mul", x, token_mask), axis1, keepdims=0)
    counts = g.op("Max", g.op("ReduceSum", token_mask, axis1, keepdims=0), g.const(1e-9))
    mean = g.op("Div", summed, counts)
    norm = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", mean, mean), axis1, keepdims=1))
    g.nodes.append(helper.make_node("Div", [mean, g.op("Max", norm, g.const(1e-12))], [OUTPUT]))

    tokens = ["batch", "tokens"]
    graph = helper.make_graph(
        g.nodes,
        "minilm_sentence_encoder",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, tokens)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", config.hidden_size])],
        g.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
