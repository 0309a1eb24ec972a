"""The bundled all-MiniLM-L6-v2 on onnxruntime: same vectors as sentence-transformers, offline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from chromadb.utils.embedding_functions import known_embedding_functions
from numpy.typing import NDArray

from tests.support.embeddings import HashEmbeddingFunction
from tests.support.minilm import shared_minilm
from worker.errors import ConfigError
from worker.search.embeddings import MiniLmEmbeddingFunction, load_embedding_function

# Written by tests/data/embeddings/make_reference.py: a float64 numpy BERT, one sentence at a
# time, sharing no code with worker/search/embeddings.py.
REFERENCE = json.loads(
    (Path(__file__).parents[3] / "tests" / "data" / "embeddings" / "reference.json").read_text()
)


@pytest.fixture(name="minilm", scope="session")
def _fix_minilm() -> MiniLmEmbeddingFunction:
    return shared_minilm()


@pytest.fixture(name="reference_run", scope="module")
def _fix_reference_run(minilm: MiniLmEmbeddingFunction) -> NDArray[np.float32]:
    # All sentences in one call: batching and padding must not change any vector.
    return np.array(minilm(REFERENCE["sentences"]))


@pytest.mark.parametrize("index", range(len(REFERENCE["sentences"])))
def test_vectors_match_the_reference_forward_pass(
    reference_run: NDArray[np.float32], index: int
) -> None:
    expected = np.array(REFERENCE["vectors"][index])
    got = reference_run[index]
    assert got.shape == (384,)
    assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5
    cosine = float(got @ expected / np.linalg.norm(expected))
    assert cosine >= 0.999, f"{REFERENCE['sentences'][index]!r}: cosine {cosine:.6f}"


def test_similarities_match_the_ones_sentence_transformers_publishes(
    minilm: MiniLmEmbeddingFunction,
) -> None:
    # sentence-transformers' README computes these three with all-MiniLM-L6-v2:
    # 0.6660, 0.1046 and 0.1411 — an anchor independent of this repository's code.
    a, b, c = np.array(
        minilm(
            ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
        )
    )
    assert [round(float(x), 4) for x in (a @ b, a @ c, b @ c)] == [0.6660, 0.1046, 0.1411]


def test_a_text_embeds_the_same_alone_and_beside_longer_ones(
    minilm: MiniLmEmbeddingFunction,
) -> None:
    short = "cache TTL for product pages"
    alone = np.array(minilm([short]))[0]
    padded = np.array(minilm([short, "word " * 300, "a much longer sentence " * 10]))[0]
    assert float(alone @ padded) > 0.99999


def test_the_class_is_registered_and_rebuilds_from_its_stored_config() -> None:
    assert known_embedding_functions[MiniLmEmbeddingFunction.name()] is MiniLmEmbeddingFunction
    ef = MiniLmEmbeddingFunction(batch_size=8)
    rebuilt = MiniLmEmbeddingFunction.build_from_config(ef.get_config())
    assert isinstance(rebuilt, MiniLmEmbeddingFunction)
    assert rebuilt.get_config() == ef.get_config()
    assert ef.default_space() == "cosine"


def test_unset_memq_embedding_means_the_bundled_model() -> None:
    assert isinstance(load_embedding_function(None), MiniLmEmbeddingFunction)


def test_memq_embedding_plugs_in_another_function() -> None:
    ef = load_embedding_function("tests.support.embeddings:make_hash_embedding")
    assert isinstance(ef, HashEmbeddingFunction)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no-colon", "must look like module:callable"),
        ("tests.support.nope:make", "cannot import it"),
        ("tests.support.embeddings:missing", "cannot import it"),
        ("tests.support.embeddings:DIMENSIONS", "is not callable"),
        ("json:dumps", "calling it failed"),
        ("tests.support.embeddings:DIMENSIONS.__class__", "cannot import it"),
        ("builtins:object", "not a chroma EmbeddingFunction"),
    ],
)
def test_a_bad_memq_embedding_is_a_one_line_config_error(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_embedding_function(spec)
    assert "\n" not in str(info.value)
