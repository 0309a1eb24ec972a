"""What every command shares: loading settings once and turning errors into exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from pipeline.errors import PipelineError
from worker.errors import ConfigError, WorkerError
from worker.settings import Settings, load_settings, read_settings_file

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2


class BadInputError(WorkerError):
    """The command's input or arguments are unusable (exit code 2)."""


def settings_from_environment() -> Settings:
    """Load settings from MEMQ_CONFIG (a TOML file, optional) and the environment."""
    config = os.environ.get("MEMQ_CONFIG")
    file_values = read_settings_file(Path(config).expanduser()) if config else None
    return load_settings(os.environ, file_values)


def fail(message: str, code: int) -> typer.Exit:
    """Print a one-line reason on stderr and return the Exit to raise."""
    print(f"memq: {' '.join(message.split())}", file=sys.stderr)
    return typer.Exit(code)


@contextmanager
def exit_codes() -> Iterator[None]:
    """Map memq's errors to the CLI contract: 2 for bad input or config, 1 for the rest."""
    try:
        yield
    except (ConfigError, BadInputError, PipelineError) as e:
        raise fail(str(e), EXIT_BAD_INPUT) from e
    except WorkerError as e:
        raise fail(str(e), EXIT_RUNTIME) from e
