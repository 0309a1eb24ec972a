"""A plain wheel carries the bundled modes, and the loader installed from it finds them."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What the build reads; copied so that the shared checkout gets no build/ or egg-info churn.
SOURCES = ("pyproject.toml", "README.md", "pipeline", "worker", "modes")
# Offline: the venv's setuptools builds it, so it must read pyproject's SPDX `license` string.
MIN_SETUPTOOLS = (77,)


@pytest.fixture(name="wheel", scope="module")
def _fix_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    version = importlib.metadata.version("setuptools")
    if tuple(int(part) for part in version.split(".")[:1]) < MIN_SETUPTOOLS:
        pytest.fail(f"setuptools {version} cannot build memq offline; pip install -e '.[dev]'")
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy(REPO / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*command, "--no-index", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("memq-*.whl")
    return wheel


def test_the_wheel_holds_every_bundled_mode_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    bundled = {f"modes/{path.name}" for path in (REPO / "modes").glob("*.json")}
    assert "modes/code.json" in bundled
    assert {"modes/code--ja.json", "modes/code--chill.json"} <= bundled
    assert {name for name in names if name.startswith("modes/")} == bundled
    assert {"pipeline/prompting/mode_files.py", "pipeline/prompting/modes.py"} <= names


def test_the_wheel_holds_every_python_module_of_the_source(wheel: Path) -> None:
    # pyproject lists the packages by name: a new package left out of it installs as nothing.
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    modules = {
        path.relative_to(REPO).as_posix()
        for root in ("pipeline", "worker")
        for path in (REPO / root).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert "worker/storage/sql/store.py" in modules
    assert sorted(modules - names) == []


def test_the_wheel_holds_the_web_uis_templates_and_static_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    ui = REPO / "worker" / "fanout" / "ui"
    files = {
        path.relative_to(REPO).as_posix()
        for folder in ("templates", "static")
        for path in (ui / folder).iterdir()
    }
    assert {"worker/fanout/ui/templates/card.html", "worker/fanout/ui/static/app.js"} <= files
    assert files <= names


def test_the_installed_loader_finds_its_bundled_modes(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from pathlib import Path\n"
        "from pipeline.prompting import mode_files\n"
        "site = Path(sys.argv[1]).resolve()\n"
        "assert Path(mode_files.__file__).resolve().is_relative_to(site), mode_files.__file__\n"
        "assert mode_files.BUNDLED_MODES_DIR == site / 'modes', mode_files.BUNDLED_MODES_DIR\n"
        "mode = mode_files.load_mode('code--ja')\n"
        "print(mode.id, mode.name, len(mode.warnings), ' '.join(mode_files.list_modes()))\n"
    )
    # -I: neither the cwd nor PYTHONPATH can put the checkout's copy on sys.path.
    done = subprocess.run(
        [sys.executable, "-I", "-c", script, str(site)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = " ".join(sorted(path.stem for path in (REPO / "modes").glob("*.json")))
    assert done.stdout.strip() == f"code--ja Code Development (Japanese) 0 {listed}"


def test_the_wheel_holds_the_agent_readers_and_the_opencode_plugin(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {
        "worker/ingest/agents/registry.py",
        "worker/ingest/agents/opencode.py",
        "worker/ingest/agents/opencode_plugin.js",
    } <= names
