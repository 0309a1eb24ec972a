"""The pure compression pipeline: events, modes, prompts, parser, classifier, content hash.

Each public name loads its module on first use (PEP 562): the Claude Code hook imports
this package on every tool call and needs only events, framing and redaction, not the
parser, the modes and the prompts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same names, for type checkers
    from pipeline.errors import *  # noqa: F403
    from pipeline.events import *  # noqa: F403
    from pipeline.prompting.framing import *  # noqa: F403
    from pipeline.prompting.mode_files import *  # noqa: F403
    from pipeline.prompting.modes import *  # noqa: F403
    from pipeline.prompting.prompts import *  # noqa: F403
    from pipeline.prompting.truncate import *  # noqa: F403
    from pipeline.redaction.privacy import *  # noqa: F403
    from pipeline.redaction.redact import *  # noqa: F403
    from pipeline.replies.classify import *  # noqa: F403
    from pipeline.replies.parser import *  # noqa: F403
    from pipeline.turns.content_hash import *  # noqa: F403
    from pipeline.turns.evidence import *  # noqa: F403

# The public API, each name under the module that defines it.
_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    f"pipeline.{module}": tuple(names.split())
    for module, names in {
        "replies.classify": "OutputCategory classify_observer_output"
        " is_auth_failure_observer_output is_quota_limited_observer_output preview_output"
        " quota_reset_hint",
        "turns.content_hash": "compute_observation_content_hash",
        "errors": "EventDecodeError ModeError ModeNotFoundError PipelineError",
        "events": "End Event Prompt Summarize ToolCall decode_event encode_event",
        "turns.evidence": "FileEvidence file_evidence mentioned_paths merge_model_files"
        " normalise_path patch_paths",
        "prompting.framing": "escape_xml_text render_tool_field",
        "prompting.mode_files": "list_modes load_mode",
        "prompting.modes": "Mode ModeFile ModePrompts ObservationConcept ObservationType"
        " resolve_mode",
        "replies.parser": "ParsedObservation ParsedSummary ParseResult parse_agent_xml"
        " strip_code_fences",
        "prompting.prompts": "EmptyBatchError SessionHeader build_continuation_prompt"
        " build_init_prompt build_observation_prompt build_summary_prompt observation_skeleton",
        "redaction.privacy": "PRIVATE_TAG_NAMES is_entirely_private strip_private_tags"
        " strip_private_value",
        "redaction.redact": "SECRET_KINDS SecretMatch find_secrets redact_secrets redact_value",
        "prompting.truncate": "truncate_observation_field",
    }.items()
}
_HOME = {name: module for module, names in _MODULE_NAMES.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
