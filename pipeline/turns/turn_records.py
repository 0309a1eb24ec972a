"""Turn a parsed reply into storage rows: content hashes, file provenance, summaries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pipeline.events import ToolCall
from pipeline.records import ObservationRow, SummaryRow
from pipeline.replies.parser import ParsedObservation, ParsedSummary
from pipeline.turns.content_hash import compute_observation_content_hash
from pipeline.turns.evidence import (
    evidence_hashes,
    file_evidence,
    mentioned_paths,
    observation_files,
)


def observation_rows(
    observations: Sequence[ParsedObservation],
    calls: Sequence[ToolCall],
    *,
    session: str,
    project: str,
    prompt_number: int | None,
    created_at: datetime,
    model: str,
    event_ids: list[str],
) -> list[ObservationRow]:
    """One row per parsed observation; files come from the batch's tool-call evidence.

    Each observation gets the evidence files it names (all of them when it names none), and
    a path the model lists is kept only when the batch's tool calls mention it too
    (`observation_files`).
    """
    evidence = file_evidence(calls)
    batch_paths = mentioned_paths(calls)
    hashes = evidence_hashes(calls)
    files = [
        observation_files(o.files_read, o.files_modified, evidence, hashes, batch_paths)
        for o in observations
    ]
    return [
        ObservationRow(
            memory_session_id=session,
            project=project,
            type=o.type,
            title=o.title,
            subtitle=o.subtitle,
            facts=list(o.facts),
            narrative=o.narrative,
            concepts=list(o.concepts),
            files_read=f.read,
            files_modified=f.modified,
            prompt_number=prompt_number,
            content_hash=compute_observation_content_hash(session, o.title, o.narrative, o.facts),
            created_at=created_at,
            model=model,
            type_fallback=o.type_fallback,
            source_event_ids=event_ids,
            file_hashes=f.hashes,
        )
        for o, f in zip(observations, files, strict=True)
    ]


def summary_row(
    summary: ParsedSummary,
    *,
    session: str,
    project: str,
    prompt_number: int | None,
    created_at: datetime,
    model: str,
) -> SummaryRow:
    """The storage row of a (non-skipped) summary."""
    return SummaryRow(
        memory_session_id=session,
        project=project,
        request=summary.request,
        investigated=summary.investigated,
        learned=summary.learned,
        completed=summary.completed,
        next_steps=summary.next_steps,
        notes=summary.notes,
        prompt_number=prompt_number,
        created_at=created_at,
        model=model,
    )
