"""The pure compression pipeline: events, modes, prompts, parser, classifier, content hash."""

from pipeline.errors import EventDecodeError, ModeError, ModeNotFoundError, PipelineError
from pipeline.events import End, Event, Prompt, Summarize, ToolCall, decode_event, encode_event
from pipeline.modes import Mode, ModePrompts, ObservationConcept, ObservationType

__all__ = [
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
    "decode_event",
    "encode_event",
]
