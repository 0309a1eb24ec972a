"""Mode files on disk: the bundled directory, the search order, listing and reading them.

DESIGN's one sanctioned file read in `pipeline/`: `load_mode` takes the directories as
arguments and only reads; the merge itself is the pure pipeline.prompting.modes.resolve_mode.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import ModeError, ModeNotFoundError
from pipeline.prompting.modes import FALLBACK_MODE_ID, Mode, ModeFile, is_mode_id, resolve_mode

# `modes/` sits beside the `pipeline` package: the repo root in a checkout, site-packages when
# installed from the wheel (pyproject.toml ships it as package data).
BUNDLED_MODES_DIR = Path(__file__).resolve().parents[2] / "modes"


def load_mode(
    mode_id: str, modes_dir: Path | None = None, *, extra_dirs: Sequence[Path] = ()
) -> Mode:
    """Load and merge a mode; `extra_dirs` are searched before `modes_dir` (default: bundled).

    The rules (`--` overrides, fallbacks with warnings) are pipeline.prompting.modes.resolve_mode's;
    a missing `code.json` raises ModeNotFoundError asking for a reinstall.
    """
    dirs = _search_dirs(modes_dir, extra_dirs)
    return resolve_mode(mode_id, functools.partial(_read_mode_file, dirs))


def list_modes(modes_dir: Path | None = None, *, extra_dirs: Sequence[Path] = ()) -> list[str]:
    """Sorted ids of every mode file (with a valid id) in the searched directories."""
    ids = {
        path.stem
        for directory in _search_dirs(modes_dir, extra_dirs)
        if directory.is_dir()
        for path in directory.glob("*.json")
        if is_mode_id(path.stem)
    }
    return sorted(ids)


def _search_dirs(modes_dir: Path | None, extra_dirs: Sequence[Path]) -> tuple[Path, ...]:
    ordered = [*extra_dirs, BUNDLED_MODES_DIR if modes_dir is None else modes_dir]
    return tuple(dict.fromkeys(ordered))


def _read_mode_file(dirs: Sequence[Path], file_id: str) -> ModeFile:
    """The first `<file_id>.json` in `dirs`, read as text; named by its path in messages."""
    path = _find(file_id, dirs)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ModeError(f"mode file {path} is unreadable: {e}") from None
    return ModeFile(source=str(path), content=text)


def _find(file_id: str, dirs: Sequence[Path]) -> Path:
    for directory in dirs:
        path = directory / f"{file_id}.json"
        if path.is_file():
            return path
    if file_id == FALLBACK_MODE_ID:
        # Nothing is left to fall back to; the last directory is the one that should hold it.
        raise ModeNotFoundError(
            f"bundled mode {FALLBACK_MODE_ID}.json is missing from {dirs[-1]}; reinstall memq"
        )
    searched = ", ".join(map(str, dirs))
    raise ModeNotFoundError(f"mode file {file_id}.json not found (searched {searched})")
