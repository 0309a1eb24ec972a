"""Secrets where developers print them never leave the producer; ordinary text does.

Values are made at random on every run (the seed is in each failure message).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from datetime import UTC, datetime

import msgspec
import pytest

from pipeline.events import Event, Prompt, ToolCall
from tests.support.agent_payloads import SHAPES, agent_events
from tests.support.ordinary_corpus import ordinary_texts
from tests.support.secret_corpus import SecretCase, secret_cases
from worker.ingest.prepare import prepare_encoded

SEED = int.from_bytes(os.urandom(4), "big")
CASES = secret_cases(random.Random(SEED))
_COMMON = {
    "event_id": "e1",
    "memory_session_id": "s1",
    "project": "shop",
    "occurred_at": datetime(2025, 1, 1, tzinfo=UTC),
}


def _emitted(event: Event) -> bytes:
    return prepare_encoded(event, 1024 * 1024)[1]


def _placements(text: str) -> list[Event]:
    return [
        ToolCall(tool_name="Bash", tool_input={"command": "cat conf"}, tool_output=text, **_COMMON),
        ToolCall(tool_name="Bash", tool_input={"command": text}, **_COMMON),
        ToolCall(tool_name="Write", tool_input={"file_path": "x", "content": text}, **_COMMON),
        Prompt(prompt_text=f"why does this fail?\n{text}", **_COMMON),
    ]


def test_the_corpus_is_large_and_varied() -> None:
    assert len(CASES) >= 150
    assert len({case.format.split("/")[0] for case in CASES}) >= 60


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.format)
def test_no_secret_reaches_the_wire(case: SecretCase) -> None:
    assert case.secret in case.text
    escaped = msgspec.json.encode(case.secret)[1:-1]
    for event in _placements(case.text):
        raw = _emitted(event)
        assert case.secret.encode() not in raw, (SEED, case.format, raw[:400])
        assert escaped not in raw, (SEED, case.format, raw[:400])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.format)
def test_no_secret_reaches_the_wire_from_a_real_agent_payload(case: SecretCase) -> None:
    # Through memq's own hook readers: a Read's file content, a Bash's stdout, command and
    # error, an Edit's patch lines, a Write's content, a prompt, Codex's shell output.
    escaped = msgspec.json.encode(case.secret)[1:-1]
    for shape in SHAPES:
        for event in agent_events(shape, case.text):
            raw = _emitted(event)
            assert case.secret.encode() not in raw, (SEED, case.format, shape, raw[:400])
            assert escaped not in raw, (SEED, case.format, shape, raw[:400])


def test_ordinary_developer_text_survives() -> None:
    texts = ordinary_texts(random.Random(SEED))
    total = kept = 0
    for text in texts:
        raw = _emitted(ToolCall(tool_name="Bash", tool_output=text, **_COMMON))
        event = msgspec.json.decode(raw)
        before, after = Counter(text.split()), Counter(event["tool_output"].split())
        total += sum(before.values())
        kept += sum((before & after).values())
    assert total > 1000
    assert kept / total >= 0.99, (SEED, kept, total)
