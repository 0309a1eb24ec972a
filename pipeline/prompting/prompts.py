"""The observer's prompts, built from a mode's text and escaped event values; no I/O, no clock.

Mode text is trusted and inserted as it is; every value from the observed session (user
requests, tool names, working directories, tool fields, assistant messages, project and
session ids) goes through `escape_xml_text`, so none of it can open or close an element.
Sections are separated by one blank line and empty mode texts are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from pipeline.errors import PipelineError
from pipeline.events import Prompt, ToolCall
from pipeline.prompting.framing import escape_xml_text
from pipeline.prompting.modes import Mode
from pipeline.prompting.truncate import OBSERVATION_FIELD_MAX_CHARS, split_observation_field

SESSION_ELEMENT = "observed_from_primary_session"
RECORDED_ELEMENT = "recorded_so_far"
SUMMARY_FIELDS = ("request", "investigated", "learned", "completed", "next_steps", "notes")
_MESSAGE = "last_assistant_message"
_FACT_LINES = 3
_CONCEPT_LINES = 2
_FILE_LINES = 2


class SessionHeader(msgspec.Struct, frozen=True, kw_only=True):
    """Whose session the observer watches: the block that opens its system prompt."""

    project: str
    memory_session_id: str
    user_prompt: str
    prompt_number: int
    requested_at: datetime

    def render(self) -> str:
        """The `<observed_from_primary_session>` XML, every value escaped."""
        session_id = escape_xml_text(self.memory_session_id)
        return "\n".join(
            [
                f"<{SESSION_ELEMENT}>",
                f"  <project>{escape_xml_text(self.project)}</project>",
                f"  <memory_session_id>{session_id}</memory_session_id>",
                f"  {_user_request(self.user_prompt, self.prompt_number)}",
                f"  <requested_at>{format_timestamp(self.requested_at)}</requested_at>",
                f"</{SESSION_ELEMENT}>",
            ]
        )


class EmptyBatchError(PipelineError):
    """An observation prompt was asked for with no tool calls."""


def observation_skeleton(mode: Mode) -> str:
    """The `<observation>` XML the observer must answer with, generated from the mode."""
    p = mode.prompts
    lines = [
        "<observation>",
        f"  <type>[ {' | '.join(mode.type_ids)} ]</type>",
        *_comment(p.type_guidance),
        f"  <title>{p.xml_title_placeholder}</title>",
        f"  <subtitle>{p.xml_subtitle_placeholder}</subtitle>",
        *_list_element("facts", "fact", p.xml_fact_placeholder, _FACT_LINES),
        *_comment(p.field_guidance),
        f"  <narrative>{p.xml_narrative_placeholder}</narrative>",
        *_list_element("concepts", "concept", p.xml_concept_placeholder, _CONCEPT_LINES),
        *_comment(p.concept_guidance),
        *_list_element("files_read", "file", p.xml_file_placeholder, _FILE_LINES),
        *_list_element("files_modified", "file", p.xml_file_placeholder, _FILE_LINES),
        "</observation>",
    ]
    return _sections(p.output_format_header, "\n".join(lines), p.format_examples, p.footer)


def build_init_prompt(mode: Mode, session: SessionHeader) -> str:
    """The system prompt that starts a new observer session."""
    p = mode.prompts
    return _sections(
        p.system_identity,
        session.render(),
        p.observer_role,
        p.spatial_awareness,
        p.recording_focus,
        p.skip_guidance,
        observation_skeleton(mode),
        p.header_memory_start,
    )


def build_continuation_prompt(mode: Mode, session: SessionHeader) -> str:
    """The system prompt that resumes observing a session whose observer state was lost."""
    p = mode.prompts
    return _sections(
        p.continuation_greeting,
        session.render(),
        p.system_identity,
        p.observer_role,
        p.spatial_awareness,
        p.recording_focus,
        p.skip_guidance,
        p.continuation_instruction,
        observation_skeleton(mode),
        p.header_memory_continued,
    )


def build_observation_prompt(
    calls: ToolCall | Sequence[ToolCall],
    *,
    mode: Mode,
    field_budget_chars: int = OBSERVATION_FIELD_MAX_CHARS,
    new_request: Prompt | None = None,
    digest: Sequence[str] = (),
) -> str:
    """One user message framing a batch of tool calls, in order, for the observer.

    `digest` lists what the session has stored so far (one line each), so the observer
    can skip what it already wrote down without being sent the earlier exchanges again.
    """
    batch = (calls,) if isinstance(calls, ToolCall) else tuple(calls)
    if not batch:
        raise EmptyBatchError("an observation prompt needs at least one tool call")
    framed = "\n".join(_frame_call(call, field_budget_chars) for call in batch)
    notice = ""
    if new_request is not None:
        request = _user_request(new_request.prompt_text, new_request.prompt_number)
        notice = f"{mode.prompts.new_request_notice}\n{request}"
    return _sections(_digest(mode, digest), notice, framed, mode.prompts.observation_instruction)


def build_summary_prompt(
    mode: Mode,
    *,
    last_assistant_message: str | None,
    user_prompt: str | None = None,
    prompt_number: int | None = None,
    digest: Sequence[str] = (),
) -> str:
    """The user message that asks for a `<summary>` of the session so far."""
    p = mode.prompts
    request = ""
    if user_prompt is not None or prompt_number is not None:
        request = _user_request(user_prompt or "", prompt_number)
    message = escape_xml_text(last_assistant_message or "")
    placeholders = (
        p.xml_summary_request_placeholder,
        p.xml_summary_investigated_placeholder,
        p.xml_summary_learned_placeholder,
        p.xml_summary_completed_placeholder,
        p.xml_summary_next_steps_placeholder,
        p.xml_summary_notes_placeholder,
    )
    pairs = zip(SUMMARY_FIELDS, placeholders, strict=True)
    children = (f"  <{tag}>{text}</{tag}>" for tag, text in pairs)
    skeleton = _lines(p.summary_format_instruction, "<summary>", *children, "</summary>")
    return _sections(
        p.summary_mode_switch,
        _lines(p.header_summary_checkpoint, p.summary_instruction),
        request,
        _digest(mode, digest),
        _lines(p.summary_context_label, f"<{_MESSAGE}>{message}</{_MESSAGE}>"),
        skeleton,
        p.summary_skip_guidance,
        p.summary_footer,
    )


def format_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and `Z`; a naive datetime is taken as UTC."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if utc.year >= 1000:  # isoformat is much cheaper than strftime, and pads years below 1000
        return f"{utc.isoformat(timespec='milliseconds')[:-6]}Z"
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def _frame_call(call: ToolCall, budget: int) -> str:
    lines = [
        f"<{SESSION_ELEMENT}>",
        f"  <what_happened>{escape_xml_text(call.tool_name)}</what_happened>",
        f"  <occurred_at>{format_timestamp(call.occurred_at)}</occurred_at>",
    ]
    if call.cwd:
        lines.append(f"  <working_directory>{escape_xml_text(call.cwd)}</working_directory>")
    lines.append(f"  <parameters>{_frame_field(call.tool_input, budget)}</parameters>")
    # A failed call's output is its error: the observer must not read it as a success.
    outcome = 'outcome failed="true"' if call.failed else "outcome"
    lines.append(f"  <{outcome}>{_frame_field(call.tool_output, budget)}</outcome>")
    lines.append(f"</{SESSION_ELEMENT}>")
    return "\n".join(lines)


def _digest(mode: Mode, digest: Sequence[str]) -> str:
    if not digest:
        return ""
    lines = "\n".join(f"- {escape_xml_text(line)}" for line in digest)
    return f"{mode.prompts.recorded_notice}\n<{RECORDED_ELEMENT}>\n{lines}\n</{RECORDED_ELEMENT}>"


def _frame_field(value: object, budget: int) -> str:
    # Escape head and tail separately: the marker must stay a real element, and the budget
    # counts the tool's own characters rather than the escapes.
    cut = split_observation_field(value, budget)
    return escape_xml_text(cut.head) + cut.marker + escape_xml_text(cut.tail)


def _user_request(text: str, prompt_number: int | None) -> str:
    number = "" if prompt_number is None else f' prompt_number="{prompt_number}"'
    return f"<user_request{number}>{escape_xml_text(text)}</user_request>"


def _comment(guidance: str) -> list[str]:
    if not guidance:
        return []
    return ["  <!--", *(f"    {line}".rstrip() for line in guidance.splitlines()), "  -->"]


def _list_element(outer: str, inner: str, placeholder: str, count: int) -> list[str]:
    return [f"  <{outer}>", *[f"    <{inner}>{placeholder}</{inner}>"] * count, f"  </{outer}>"]


def _lines(*parts: str) -> str:
    return "\n".join(part for part in parts if part)


def _sections(*parts: str) -> str:
    return "\n\n".join(part for part in parts if part)
