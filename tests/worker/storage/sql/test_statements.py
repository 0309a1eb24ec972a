"""The statements both backends share: INSERTs built from column lists, listings from filters."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from worker.storage.records import (
    DroppedOutput,
    ObservationRow,
    PromptRow,
    StoredRow,
    SummaryRow,
    TokenUsage,
)
from worker.storage.sql import listings, statements
from worker.storage.sql.params import stored_record
from worker.storage.sql.rows import RowSelects

AT = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
INSERTS = [
    (statements.PROMPT, PromptRow),
    (statements.OBSERVATION, ObservationRow),
    (statements.SUMMARY, SummaryRow),
    (statements.DROPPED, DroppedOutput),
    (statements.USAGE, TokenUsage),
]


OBSERVATION = ObservationRow(
    memory_session_id="s1",
    project="p",
    type="change",
    title="T",
    subtitle=None,
    facts=["f1", "f2"],
    narrative="n",
    concepts=["c"],
    files_read=[],
    files_modified=["a.py"],
    prompt_number=2,
    content_hash="h",
    created_at=AT,
    model="m",
    type_fallback=True,
    source_event_ids=["e1"],
    file_hashes={"a.py": "abc", "b.py": None},
)


@pytest.mark.parametrize(("insert", "record"), INSERTS)
def test_each_insert_numbers_one_placeholder_per_column(
    insert: statements.Insert, record: type[msgspec.Struct]
) -> None:
    columns = ", ".join(insert.columns)
    placeholders = ", ".join(f"${n}" for n in range(1, len(insert.columns) + 1))
    assert f"({columns}) VALUES ({placeholders})" in insert.sql
    # Every column is read from the record's field of that name (epoch ms from its time).
    fields = set(record.__struct_fields__)
    assert {c.removesuffix("_epoch_ms") for c in insert.columns} <= fields


def test_insert_values_spell_times_lists_and_mappings_as_stored() -> None:
    insert = statements.OBSERVATION
    values = dict(zip(insert.columns, insert.values(OBSERVATION), strict=True))
    assert values["created_at"] == "2024-05-01T12:00:00.123Z"
    assert values["created_at_epoch_ms"] == 1714564800123
    assert values["facts"] == '["f1","f2"]'
    assert values["files_read"] == "[]"
    assert values["file_hashes"] == '{"a.py":"abc","b.py":null}'
    assert values["type_fallback"] is True
    assert values["subtitle"] is None
    assert values["prompt_number"] == 2


def test_a_stored_record_is_the_row_as_it_reads_back() -> None:
    assert stored_record(7, msgspec.structs.replace(OBSERVATION, file_hashes={})) == StoredRow(
        kind="observation",
        id=7,
        memory_session_id="s1",
        project="p",
        created_at="2024-05-01T12:00:00.123Z",
        prompt_number=2,
        type="change",
        title="T",
        facts=["f1", "f2"],
        narrative="n",
        concepts=["c"],
        files_read=[],
        files_modified=["a.py"],
    )
    summary = SummaryRow(
        memory_session_id="s1",
        project="p",
        request="r",
        investigated=None,
        learned="l",
        completed=None,
        next_steps="n",
        notes=None,
        prompt_number=None,
        created_at=AT,
    )
    assert stored_record(8, summary) == StoredRow(
        kind="summary",
        id=8,
        memory_session_id="s1",
        project="p",
        created_at="2024-05-01T12:00:00.123Z",
        request="r",
        learned="l",
        next_steps="n",
    )


def test_listings_write_only_the_filters_given() -> None:
    assert listings.sessions_query(None, 5)[1] == (5,)
    sql, values = listings.sessions_query("p", 5)
    assert "WHERE s.project = $2" in sql
    assert values == (5, "p")
    sql, values = listings.observations_query(RowSelects(), None, "p", 3)
    assert "WHERE project = $2" in sql
    assert "memory_session_id =" not in sql
    assert list(values) == [3, "p"]
    sql, values = listings.dropped_query(4, include_replayed=True)
    assert "WHERE" not in sql
    assert values == (4,)
