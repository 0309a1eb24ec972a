"""The pure compression pipeline: events, modes, prompts, parser, classifier, content hash.

Each name is imported from its module on first use (PEP 562), so `import pipeline.events`
does not load the parser, the modes and the prompts: the Claude Code hook imports this
package on every tool call of the agent and needs only events, privacy and redaction.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.classify import (
        OutputCategory,
        classify_observer_output,
        is_auth_failure_observer_output,
        is_quota_limited_observer_output,
        preview_output,
        quota_reset_hint,
    )
    from pipeline.content_hash import compute_observation_content_hash
    from pipeline.errors import EventDecodeError, ModeError, ModeNotFoundError, PipelineError
    from pipeline.events import End, Event, Prompt, Summarize, ToolCall, decode_event, encode_event
    from pipeline.evidence import (
        FileEvidence,
        file_evidence,
        mentioned_paths,
        merge_model_files,
        normalise_path,
        patch_paths,
    )
    from pipeline.framing import escape_xml_text, render_tool_field
    from pipeline.mode_files import list_modes, load_mode
    from pipeline.modes import (
        Mode,
        ModeFile,
        ModePrompts,
        ObservationConcept,
        ObservationType,
        resolve_mode,
    )
    from pipeline.parser import (
        ParsedObservation,
        ParsedSummary,
        ParseResult,
        parse_agent_xml,
        strip_code_fences,
    )
    from pipeline.prompts import (
        EmptyBatchError,
        build_continuation_prompt,
        build_init_prompt,
        build_observation_prompt,
        build_summary_prompt,
        observation_skeleton,
    )
    from pipeline.redaction.privacy import (
        PRIVATE_TAG_NAMES,
        is_entirely_private,
        strip_private_tags,
        strip_private_value,
    )
    from pipeline.redaction.redact import (
        SECRET_KINDS,
        SecretMatch,
        find_secrets,
        redact_secrets,
        redact_value,
    )
    from pipeline.truncate import truncate_observation_field

# Where each public name lives (tests/pipeline/test_package.py keeps it equal to __all__).
_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "pipeline.classify": (
        "OutputCategory",
        "classify_observer_output",
        "is_auth_failure_observer_output",
        "is_quota_limited_observer_output",
        "preview_output",
        "quota_reset_hint",
    ),
    "pipeline.content_hash": ("compute_observation_content_hash",),
    "pipeline.errors": ("EventDecodeError", "ModeError", "ModeNotFoundError", "PipelineError"),
    "pipeline.events": (
        "End",
        "Event",
        "Prompt",
        "Summarize",
        "ToolCall",
        "decode_event",
        "encode_event",
    ),
    "pipeline.evidence": (
        "FileEvidence",
        "file_evidence",
        "mentioned_paths",
        "merge_model_files",
        "normalise_path",
        "patch_paths",
    ),
    "pipeline.framing": ("escape_xml_text", "render_tool_field"),
    "pipeline.mode_files": ("list_modes", "load_mode"),
    "pipeline.modes": (
        "Mode",
        "ModeFile",
        "ModePrompts",
        "ObservationConcept",
        "ObservationType",
        "resolve_mode",
    ),
    "pipeline.parser": (
        "ParsedObservation",
        "ParsedSummary",
        "ParseResult",
        "parse_agent_xml",
        "strip_code_fences",
    ),
    "pipeline.redaction.privacy": (
        "PRIVATE_TAG_NAMES",
        "is_entirely_private",
        "strip_private_tags",
        "strip_private_value",
    ),
    "pipeline.prompts": (
        "EmptyBatchError",
        "build_continuation_prompt",
        "build_init_prompt",
        "build_observation_prompt",
        "build_summary_prompt",
        "observation_skeleton",
    ),
    "pipeline.redaction.redact": (
        "SECRET_KINDS",
        "SecretMatch",
        "find_secrets",
        "redact_secrets",
        "redact_value",
    ),
    "pipeline.truncate": ("truncate_observation_field",),
}
_HOME = {name: module for module, names in _MODULE_NAMES.items() for name in names}


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "PRIVATE_TAG_NAMES",
    "SECRET_KINDS",
    "EmptyBatchError",
    "End",
    "Event",
    "EventDecodeError",
    "FileEvidence",
    "Mode",
    "ModeError",
    "ModeFile",
    "ModeNotFoundError",
    "ModePrompts",
    "ObservationConcept",
    "ObservationType",
    "OutputCategory",
    "ParseResult",
    "ParsedObservation",
    "ParsedSummary",
    "PipelineError",
    "Prompt",
    "SecretMatch",
    "Summarize",
    "ToolCall",
    "build_continuation_prompt",
    "build_init_prompt",
    "build_observation_prompt",
    "build_summary_prompt",
    "classify_observer_output",
    "compute_observation_content_hash",
    "decode_event",
    "encode_event",
    "escape_xml_text",
    "file_evidence",
    "find_secrets",
    "is_auth_failure_observer_output",
    "is_entirely_private",
    "is_quota_limited_observer_output",
    "list_modes",
    "load_mode",
    "mentioned_paths",
    "merge_model_files",
    "normalise_path",
    "observation_skeleton",
    "parse_agent_xml",
    "patch_paths",
    "preview_output",
    "quota_reset_hint",
    "redact_secrets",
    "redact_value",
    "render_tool_field",
    "resolve_mode",
    "strip_code_fences",
    "strip_private_tags",
    "strip_private_value",
    "truncate_observation_field",
]
