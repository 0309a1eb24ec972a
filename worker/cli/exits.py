"""What every command shares: loading settings once and turning errors into exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

from pipeline.errors import PipelineError
from worker import settings
from worker.errors import ConfigError, WorkerError
from worker.private_files import tighten_data_dir
from worker.secret import Secret
from worker.settings import Settings

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2


class BadInputError(WorkerError):
    """The command's input or arguments are unusable (exit code 2)."""


def settings_from_environment() -> Settings:
    """Load settings from MEMQ_CONFIG (a TOML file, optional) and the environment."""
    loaded = settings.settings_from_environment(os.environ)
    tighten_data_dir(loaded.data_path)
    return loaded


def settings_with_logging() -> Settings:
    """Settings from the environment, then memq's log lines on stderr in their format: how
    every long-running command (worker, up, ui, agent, telegram, mcp) starts."""
    import logging

    from worker.logs import configure_logging  # structlog: only these commands pay for it
    from worker.masked_text import mask_log_secrets

    loaded = settings_from_environment()
    configure_logging(loaded.log_format)
    # A provider error may echo the request's key, a URL may hold a token: never in a log line.
    mask_log_secrets(logging.getLogger().handlers, configured_secrets(loaded))
    return loaded


def configured_secrets(loaded: Settings) -> list[str]:
    """Every secret setting's value that is set (API keys, tokens)."""
    values = [getattr(loaded, f) for f in loaded.__struct_fields__]
    return [v.reveal() for v in values if isinstance(v, Secret)]


def fail(message: str, code: int) -> typer.Exit:
    """Print a one-line reason on stderr and return the Exit to raise."""
    print(f"memq: {' '.join(message.split())}", file=sys.stderr)
    return typer.Exit(code)


class ExitCodeGroup(TyperGroup):
    """The `memq` group: every command's errors become the CLI's exit codes, in one place."""

    def invoke(self, ctx: Any) -> Any:  # typer's click Context is private to typer
        with exit_codes():
            return super().invoke(ctx)


@contextmanager
def exit_codes() -> Iterator[None]:
    """Map memq's errors to the CLI contract: 2 for bad input or config, 1 for the rest."""
    try:
        yield
    except (ConfigError, BadInputError, PipelineError) as e:
        raise fail(str(e), EXIT_BAD_INPUT) from e
    except WorkerError as e:
        raise fail(str(e), EXIT_RUNTIME) from e
