"""Modes: the vocabulary and prompt text the observer works with, merged from JSON documents.

Pure: the caller hands in a lookup that returns each mode file already read
(pipeline/prompting/mode_files.py, the one sanctioned file read, takes them from disk); this
module owns the id grammar, the parsing, the `--` merge and the fallbacks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import msgspec

from pipeline.errors import ModeError, ModeNotFoundError


class ObservationType(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One observation type a mode allows, e.g. `bugfix`."""

    id: str
    label: str
    description: str
    emoji: str
    work_emoji: str


class ObservationConcept(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One concept tag a mode allows, e.g. `gotcha`."""

    id: str
    label: str
    description: str


class ModePrompts(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every piece of prompt text a mode supplies; builders use nothing else."""

    system_identity: str
    spatial_awareness: str
    observer_role: str
    recording_focus: str
    skip_guidance: str
    type_guidance: str
    concept_guidance: str
    field_guidance: str
    output_format_header: str
    format_examples: str
    footer: str
    xml_title_placeholder: str
    xml_subtitle_placeholder: str
    xml_fact_placeholder: str
    xml_narrative_placeholder: str
    xml_concept_placeholder: str
    xml_file_placeholder: str
    xml_summary_request_placeholder: str
    xml_summary_investigated_placeholder: str
    xml_summary_learned_placeholder: str
    xml_summary_completed_placeholder: str
    xml_summary_next_steps_placeholder: str
    xml_summary_notes_placeholder: str
    header_memory_start: str
    header_memory_continued: str
    header_summary_checkpoint: str
    continuation_greeting: str
    continuation_instruction: str
    summary_instruction: str
    summary_context_label: str
    summary_format_instruction: str
    summary_footer: str
    # memq additions (the original hard-coded these in English or left them out)
    observation_instruction: str
    """Fixed guidance after each batch of tool calls (elided fields, skip by empty reply)."""
    summary_mode_switch: str
    """Tells the observer to answer this turn with <summary> only."""
    summary_skip_guidance: str
    """When and how to answer <skip_summary reason="..."/>."""
    summary_reminder: str
    """Sent once when a summary request was answered with <observation> blocks."""
    new_request_notice: str
    """Introduces a later user request inside an ongoing session."""
    recorded_notice: str = (
        "Already recorded in this session (do not record these again; record what is new):"
    )
    """Introduces the list of what the session has recorded so far (newest last)."""


class Mode(msgspec.Struct, frozen=True, kw_only=True):
    """A fully merged mode: parent plus every override, validated."""

    id: str
    name: str
    description: str
    version: str
    observation_types: tuple[ObservationType, ...]
    observation_concepts: tuple[ObservationConcept, ...]
    prompts: ModePrompts
    warnings: tuple[str, ...] = ()
    """Fallbacks taken while loading (missing override, ...): the caller logs them."""

    @property
    def type_ids(self) -> tuple[str, ...]:
        """The allowed type ids in file order; the first is the fallback type."""
        return tuple(t.id for t in self.observation_types)

    @property
    def concept_ids(self) -> tuple[str, ...]:
        """The allowed concept ids in file order."""
        return tuple(c.id for c in self.observation_concepts)


# Lowercase words with single `-` inside a part; parts joined by `--` (`code--ja--chill`).
MODE_ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*(?:--[a-z0-9]+(?:-[a-z0-9]+)*)*")
MODE_ID_GRAMMAR = "lowercase letters and digits, single '-' inside a part, parts joined by '--'"
FALLBACK_MODE_ID = "code"
# What a mode file may set; `id` and `warnings` are decided by the loader.
_FILE_FIELDS = frozenset(
    {"name", "description", "version", "observation_types", "observation_concepts", "prompts"}
)

_Json = dict[str, Any]


class ModeFile(msgspec.Struct, frozen=True, kw_only=True):
    """One mode file as read: its JSON (text, UTF-8 bytes or the decoded object) and its origin."""

    source: str
    """Where it came from (a path, say); every message about the file names it."""
    content: str | bytes | dict[str, Any]


ModeLookup = Callable[[str], ModeFile]
"""Returns the file for a file id (`code--ja`); raises ModeNotFoundError when there is none
and ModeError when it cannot be read. The fallback's absence is fatal, so the lookup words it."""


def is_mode_id(name: str) -> bool:
    """Whether `name` follows the mode id grammar (so a file of that name is a mode)."""
    return MODE_ID_PATTERN.fullmatch(name) is not None


def resolve_mode(mode_id: str, lookup: ModeLookup) -> Mode:
    """Merge a mode from the files `lookup` returns.

    `a` is a full mode file; `a--b` is `a` merged with the override `a--b`; `a--b--c`
    (a memq extension) applies `a--b` then `a--c`, later files winning. Objects merge key by
    key, arrays and scalars replace. A missing or broken mode falls back to `code` (whose
    overrides then apply: `foo--ja` becomes `code--ja`); a missing or broken override is
    skipped. Each fallback adds a line to `Mode.warnings`; only an unusable `code` raises
    ModeError (the lookup's own ModeNotFoundError when it is missing).
    """
    if not is_mode_id(mode_id):
        raise ModeError(f"invalid mode id {mode_id!r}: expected {MODE_ID_GRAMMAR}, e.g. code--ja")
    warnings: list[str] = []
    parent, *suffixes = mode_id.split("--")
    mode, data = _load_full(parent, lookup, warnings)
    base = used = mode.id
    for suffix in suffixes:
        try:
            file = lookup(f"{base}--{suffix}")
            merged = merge_mode_data(data, parse_mode_file(file))
            mode = _validate(f"{used}--{suffix}", merged, file.source)
        except ModeError as e:
            warnings.append(f"{e}; using mode {used!r} without it")
            continue
        used, data = f"{used}--{suffix}", merged
    return msgspec.structs.replace(mode, warnings=tuple(warnings))


def parse_mode_file(file: ModeFile) -> _Json:
    """One mode file as a JSON object with only the fields a mode file may set."""
    content = file.content
    if isinstance(content, dict):
        data: object = content
    else:
        try:
            data = json.loads(content)
        except json.JSONDecodeError as e:
            raise ModeError(
                f"mode file {file.source}: invalid JSON at line {e.lineno}, column {e.colno}: "
                f"{e.msg}"
            ) from None
        except UnicodeDecodeError as e:
            raise ModeError(f"mode file {file.source} is unreadable: {e}") from None
    if not isinstance(data, dict):
        raise ModeError(
            f"mode file {file.source}: expected a JSON object, got {type(data).__name__}"
        )
    unknown = sorted(set(data) - _FILE_FIELDS)
    if unknown:
        raise ModeError(f"mode file {file.source}: unknown field {unknown[0]!r}")
    return data


def merge_mode_data(base: _Json, override: _Json) -> _Json:
    """`override` laid over `base`: objects merge key by key, arrays and scalars replace."""
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = merge_mode_data(current, value)
        else:
            merged[key] = value
    return merged


def _load_full(mode_id: str, lookup: ModeLookup, warnings: list[str]) -> tuple[Mode, _Json]:
    """A full mode file, or `code` (with a warning) when it is unusable; also its raw data."""
    if mode_id != FALLBACK_MODE_ID:
        try:
            file = lookup(mode_id)
            data = parse_mode_file(file)
            return _validate(mode_id, data, file.source), data
        except ModeError as e:
            warnings.append(f"{e}; falling back to mode {FALLBACK_MODE_ID!r}")
    try:
        file = lookup(FALLBACK_MODE_ID)
        data = parse_mode_file(file)
        return _validate(FALLBACK_MODE_ID, data, file.source), data
    except ModeNotFoundError:
        raise  # the lookup's words: it knows where the bundled copy belongs
    except ModeError as e:
        raise ModeError(f"{e} (the fallback mode must load; fix or restore it)") from None


def _validate(mode_id: str, data: _Json, source: str) -> Mode:
    try:
        mode = msgspec.convert({**data, "id": mode_id}, Mode)
    except msgspec.ValidationError as e:
        raise ModeError(f"{source} would make mode {mode_id!r} invalid: {e}") from None
    for kind, ids in (("type", mode.type_ids), ("concept", mode.concept_ids)):
        if not all(ids) or len(set(ids)) != len(ids):
            raise ModeError(f"{source}: {kind} ids must be non-empty and unique, got {list(ids)}")
    if not mode.type_ids:
        raise ModeError(f"{source} would leave mode {mode_id!r} without observation types")
    return mode
