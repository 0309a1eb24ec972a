"""The package's public names: each loaded from its module on first use."""

from __future__ import annotations

import importlib

import pytest

import pipeline
from pipeline import _MODULE_NAMES


def test_every_public_name_has_one_home_module_and_nothing_else_does() -> None:
    homes = [name for names in _MODULE_NAMES.values() for name in names]
    assert len(homes) == len(set(homes))
    assert sorted(homes) == sorted(pipeline.__all__)


@pytest.mark.parametrize("name", pipeline.__all__)
def test_a_public_name_is_the_object_its_module_defines(name: str) -> None:
    (module,) = [m for m, names in _MODULE_NAMES.items() if name in names]
    assert getattr(pipeline, name) is getattr(importlib.import_module(module), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'redact_everything'"):
        _ = pipeline.redact_everything


def test_star_import_binds_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from pipeline import *", namespace)
    assert set(pipeline.__all__) <= set(namespace)
