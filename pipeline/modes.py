"""Modes: the vocabulary and prompt text the observer works with, loaded from JSON files."""

from __future__ import annotations

import msgspec


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
