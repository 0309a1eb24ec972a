"""Modes: the vocabulary and prompt text the observer works with, loaded from JSON files."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
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
BUNDLED_MODES_DIR = Path(__file__).resolve().parent.parent / "modes"
# What a mode file may set; `id` and `warnings` are decided by the loader.
_FILE_FIELDS = frozenset(
    {"name", "description", "version", "observation_types", "observation_concepts", "prompts"}
)

_Json = dict[str, Any]


def load_mode(
    mode_id: str, modes_dir: Path | None = None, *, extra_dirs: Sequence[Path] = ()
) -> Mode:
    """Load and merge a mode; `extra_dirs` are searched before `modes_dir` (default: bundled).

    `a` is a full mode file; `a--b` is `a` merged with the override `a--b.json`; `a--b--c`
    (a memq extension) applies `a--b.json` then `a--c.json`, later files winning. Objects
    merge key by key, arrays and scalars replace. A missing or broken mode falls back to
    `code` (whose overrides then apply: `foo--ja` becomes `code--ja`); a missing or broken
    override is skipped. Each fallback adds a line to `Mode.warnings`; only an unusable
    `code.json` raises ModeError.
    """
    if MODE_ID_PATTERN.fullmatch(mode_id) is None:
        raise ModeError(f"invalid mode id {mode_id!r}: expected {MODE_ID_GRAMMAR}, e.g. code--ja")
    dirs = _search_dirs(modes_dir, extra_dirs)
    warnings: list[str] = []
    parent, *suffixes = mode_id.split("--")
    mode, data = _load_full(parent, dirs, warnings)
    base = used = mode.id
    for suffix in suffixes:
        try:
            path = _find(f"{base}--{suffix}", dirs)
            merged = _deep_merge(data, _read_object(path))
            mode = _validate(f"{used}--{suffix}", merged, str(path))
        except ModeError as e:
            warnings.append(f"{e}; using mode {used!r} without it")
            continue
        used, data = f"{used}--{suffix}", merged
    return msgspec.structs.replace(mode, warnings=tuple(warnings))


def list_modes(modes_dir: Path | None = None, *, extra_dirs: Sequence[Path] = ()) -> list[str]:
    """Sorted ids of every mode file (with a valid id) in the searched directories."""
    ids = {
        path.stem
        for directory in _search_dirs(modes_dir, extra_dirs)
        if directory.is_dir()
        for path in directory.glob("*.json")
        if MODE_ID_PATTERN.fullmatch(path.stem) is not None
    }
    return sorted(ids)


def _search_dirs(modes_dir: Path | None, extra_dirs: Sequence[Path]) -> tuple[Path, ...]:
    ordered = [*extra_dirs, BUNDLED_MODES_DIR if modes_dir is None else modes_dir]
    return tuple(dict.fromkeys(ordered))


def _load_full(mode_id: str, dirs: Sequence[Path], warnings: list[str]) -> tuple[Mode, _Json]:
    """A full mode file, or `code` (with a warning) when it is unusable; also its raw data."""
    if mode_id != FALLBACK_MODE_ID:
        try:
            path = _find(mode_id, dirs)
            data = _read_object(path)
            return _validate(mode_id, data, str(path)), data
        except ModeError as e:
            warnings.append(f"{e}; falling back to mode {FALLBACK_MODE_ID!r}")
    try:
        path = _find(FALLBACK_MODE_ID, dirs)
    except ModeNotFoundError:
        raise ModeNotFoundError(
            f"bundled mode {FALLBACK_MODE_ID}.json is missing from {dirs[-1]}; reinstall memq"
        ) from None
    try:
        data = _read_object(path)
        return _validate(FALLBACK_MODE_ID, data, str(path)), data
    except ModeError as e:
        raise ModeError(f"{e} (the fallback mode must load; fix or restore it)") from None


def _find(file_id: str, dirs: Sequence[Path]) -> Path:
    for directory in dirs:
        path = directory / f"{file_id}.json"
        if path.is_file():
            return path
    searched = ", ".join(map(str, dirs))
    raise ModeNotFoundError(f"mode file {file_id}.json not found (searched {searched})")


def _read_object(path: Path) -> _Json:
    """One mode file as a JSON object with only the fields a mode file may set."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ModeError(
            f"mode file {path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModeError(f"mode file {path} is unreadable: {e}") from None
    if not isinstance(data, dict):
        raise ModeError(f"mode file {path}: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - _FILE_FIELDS)
    if unknown:
        raise ModeError(f"mode file {path}: unknown field {unknown[0]!r}")
    return data


def _deep_merge(base: _Json, override: _Json) -> _Json:
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = _deep_merge(current, value)
        else:
            merged[key] = value
    return merged


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
