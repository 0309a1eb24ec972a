"""The pure compression pipeline: events, modes, prompts, parser, classifier, content hash."""

from pipeline.content_hash import compute_observation_content_hash
from pipeline.errors import EventDecodeError, ModeError, ModeNotFoundError, PipelineError
from pipeline.events import End, Event, Prompt, Summarize, ToolCall, decode_event, encode_event
from pipeline.framing import escape_xml_text, render_tool_field
from pipeline.modes import (
    Mode,
    ModePrompts,
    ObservationConcept,
    ObservationType,
    list_modes,
    load_mode,
)
from pipeline.prompts import (
    EmptyBatchError,
    build_continuation_prompt,
    build_init_prompt,
    build_observation_prompt,
    build_summary_prompt,
    observation_skeleton,
)
from pipeline.truncate import truncate_observation_field

__all__ = [
    "EmptyBatchError",
    "End",
    "Event",
    "EventDecodeError",
    "Mode",
    "ModeError",
    "ModeNotFoundError",
    "ModePrompts",
    "ObservationConcept",
    "ObservationType",
    "PipelineError",
    "Prompt",
    "Summarize",
    "ToolCall",
    "build_continuation_prompt",
    "build_init_prompt",
    "build_observation_prompt",
    "build_summary_prompt",
    "compute_observation_content_hash",
    "decode_event",
    "encode_event",
    "escape_xml_text",
    "list_modes",
    "load_mode",
    "observation_skeleton",
    "render_tool_field",
    "truncate_observation_field",
]
