"""`memq prompt`: print the prompt the observer would get for one event read on stdin."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import typer

from pipeline import (
    Event,
    EventDecodeError,
    Mode,
    Prompt,
    SessionHeader,
    Summarize,
    ToolCall,
    build_init_prompt,
    build_observation_prompt,
    build_summary_prompt,
    decode_event,
)
from pipeline.prompting.mode_files import load_mode
from worker.cli.exits import BadInputError, settings_from_environment
from worker.settings import Settings

# The observer numbers prompts from 1; an event without a number is taken as the first.
_DEFAULT_PROMPT_NUMBER = 1


def register(app: typer.Typer) -> None:
    """Add `memq prompt` to the CLI."""
    app.command("prompt")(prompt)


def prompt(
    system: bool = typer.Option(
        False, "--system", help="Also print the init (system) prompt first, then a blank line."
    ),
) -> None:
    """Read one event (or a JSON array of tool_call events) on stdin; print its observer prompt.

    tool_call: the observation prompt; prompt: the init prompt; summarize: the summary prompt.
    """
    settings = settings_from_environment()
    events = _read_events(sys.stdin.buffer.read())
    mode = _mode(settings)
    for warning in mode.warnings:
        print(f"memq: warning: {warning}", file=sys.stderr)
    print(_render(events, mode, settings, system=system))


def _mode(settings: Settings) -> Mode:
    extra = (Path(settings.modes_dir).expanduser(),) if settings.modes_dir else ()
    return load_mode(settings.mode, extra_dirs=extra)


def _read_events(raw: bytes) -> tuple[Event, ...]:
    try:
        return _decode_events(raw)
    except RecursionError as e:  # msgspec raises it, not DecodeError, on absurd nesting
        raise BadInputError("bad event: JSON nested too deeply") from e


def _decode_events(raw: bytes) -> tuple[Event, ...]:
    if not raw.lstrip().startswith(b"["):
        return (decode_event(raw),)
    try:
        items = msgspec.json.decode(raw, type=list[msgspec.Raw])
    except msgspec.DecodeError as e:
        raise BadInputError(f"bad event: {e}") from e
    if not items:
        raise BadInputError("bad event: the array holds no events")
    events: list[Event] = []
    for index, item in enumerate(items):
        try:
            event = decode_event(bytes(item))
        except EventDecodeError as e:
            reason = str(e).removeprefix("bad event: ")
            raise BadInputError(f"bad event: item {index}: {reason}") from e
        if not isinstance(event, ToolCall):
            raise BadInputError(
                f"bad event: an array may hold only tool_call events; item {index} has "
                f"kind {_kind(event)!r}"
            )
        events.append(event)
    return tuple(events)


def _render(events: tuple[Event, ...], mode: Mode, settings: Settings, *, system: bool) -> str:
    first = events[0]
    if isinstance(first, Prompt):
        return _init_prompt(first, mode)
    if isinstance(first, Summarize):
        message = build_summary_prompt(mode, last_assistant_message=first.last_assistant_message)
    elif isinstance(first, ToolCall):
        calls = [e for e in events if isinstance(e, ToolCall)]
        message = build_observation_prompt(
            calls, mode=mode, field_budget_chars=settings.field_budget_chars
        )
    else:
        raise BadInputError(f"bad event: kind {_kind(first)!r} has no observer prompt")
    return f"{_init_prompt(first, mode)}\n\n{message}" if system else message


def _init_prompt(event: Event, mode: Mode) -> str:
    text, number = "", None
    if isinstance(event, Prompt):
        text, number = event.prompt_text, event.prompt_number
    return build_init_prompt(
        mode,
        SessionHeader(
            project=event.project,
            memory_session_id=event.memory_session_id,
            user_prompt=text,
            prompt_number=_DEFAULT_PROMPT_NUMBER if number is None else number,
            requested_at=event.occurred_at,
        ),
    )


def _kind(event: Event) -> str:
    return str(event.__struct_config__.tag)
