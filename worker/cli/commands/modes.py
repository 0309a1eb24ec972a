"""`memq modes list|show`: the mode ids on disk and a mode as the observer will see it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from pipeline.prompting.mode_files import list_modes, load_mode
from worker.cli.exits import settings_from_environment
from worker.cli.groups import add_group
from worker.settings import Settings


def register(app: typer.Typer) -> None:
    """Add the `modes` command group to the memq app."""
    add_group(
        app,
        "modes",
        "List and inspect observer modes.",
        {"list": list_command, "show": show_command},
    )


def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Print every mode id found in MEMQ_MODES_DIR and the bundled modes, one per line."""
    ids = list_modes(extra_dirs=_extra_dirs(settings_from_environment()))
    if as_json:
        print(json.dumps(ids))
    else:
        for mode_id in ids:
            print(mode_id)


def show_command(
    mode_id: Annotated[
        str | None, typer.Argument(metavar="ID", help="Mode id; defaults to MEMQ_MODE.")
    ] = None,
) -> None:
    """Print the fully merged mode as JSON; fallbacks taken are warned about on stderr."""
    settings = settings_from_environment()
    mode = load_mode(mode_id or settings.mode, extra_dirs=_extra_dirs(settings))
    for warning in mode.warnings:
        _warn(warning)
    data = msgspec.to_builtins(mode)
    del data["warnings"]
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _extra_dirs(settings: Settings) -> tuple[Path, ...]:
    """MEMQ_MODES_DIR, searched before the bundled modes; a missing directory is warned about."""
    configured = settings.modes_dir
    if configured is None:
        return ()
    directory = Path(configured).expanduser()
    if not directory.is_dir():
        _warn(f"MEMQ_MODES_DIR {directory} is not a directory; using the bundled modes only")
    return (directory,)


def _warn(message: str) -> None:
    print(f"memq: warning: {' '.join(message.split())}", file=sys.stderr)
