"""The house rule covers the whole house: every room and top-level module is in a contract."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_room_of_worker_is_a_layer() -> None:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    named = {room.strip() for layer in layers["layers"] for room in layer.split("|")}
    rooms = {p.parent.name for p in (REPO / "worker").glob("*/__init__.py")}
    assert named == rooms


def test_every_top_level_module_sits_below_the_rooms() -> None:
    (below,) = [c for c in _contracts() if c["name"].startswith("worker's top-level modules")]
    modules = {f"worker.{p.stem}" for p in (REPO / "worker").glob("*.py") if p.stem != "__init__"}
    assert set(below["source_modules"]) == modules
    rooms = {f"worker.{p.parent.name}" for p in (REPO / "worker").glob("*/__init__.py")}
    assert set(below["forbidden_modules"]) == rooms
