"""The `memq` console script: a fast path for the agent hook, else the full typer CLI."""

from __future__ import annotations

import os
import sys

from worker.ingest.agents import AGENTS
from worker.private_files import restrict_new_files


def main() -> None:
    """Dispatch before importing typer: the hook runs on every tool call of the agent."""
    restrict_new_files()
    if len(sys.argv) == 3 and sys.argv[1] == "hook" and sys.argv[2] in AGENTS:
        # Skips typer and every command module (~0.1 s of imports per tool call).
        raw = sys.stdin.buffer.read()
        from worker.ingest.relay import relay

        answer = relay(sys.argv[2], raw, os.environ)  # a running `memq agent` takes it
        if answer is not None:
            code = 0
            sys.stdout.buffer.write(answer)
        else:
            _import_msgspec_without_typing_extensions()
            from worker.ingest.hook import main_fast

            code = main_fast(sys.argv[2], raw)
        # Every file and socket of the hook is closed by now: skip the interpreter's
        # teardown, which frees ~140 modules one by one (~7 ms of a ~60 ms process).
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:  # a reader that went away must not turn into a failing hook
            os._exit(code)
    from worker.cli.app import main as cli_main

    cli_main()


def _import_msgspec_without_typing_extensions() -> None:
    # msgspec imports typing_extensions when it is installed, only for what `typing` has
    # had since Python 3.11, and that import alone costs the hook ~9 ms. It is hidden while
    # msgspec loads (an import of a name mapped to None raises ImportError, and msgspec
    # falls back to `typing`), then shown again for whatever is imported later.
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec  # noqa: F401
    except ImportError:
        pass  # a msgspec that needs it: the hook's own imports load both normally
    finally:
        del sys.modules["typing_extensions"]
