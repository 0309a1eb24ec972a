"""Mode merging over documents already read: `--` overrides, fallbacks with warnings, fatal code."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline import ModeError, ModeFile, ModeNotFoundError, ModePrompts, resolve_mode
from pipeline.prompting.modes import Mode, merge_mode_data, parse_mode_file
from tests.support.code_mode import CODE_CONCEPTS, CODE_TYPES

CONCEPT = {"id": "a", "label": "A", "description": "d"}

_Files = dict[str, str | bytes | dict[str, Any]]


def _code_data() -> dict[str, Any]:
    """A stand-in for code.json: its type and concept ids, every prompt its own key in brackets."""
    return {
        "name": "Code Development",
        "description": "a mode made up for tests",
        "version": "1",
        "observation_types": [
            {"id": t, "label": t, "description": f"{t} work", "emoji": "*", "work_emoji": "+"}
            for t in CODE_TYPES
        ],
        "observation_concepts": [
            {"id": c, "label": c, "description": f"{c} notes"} for c in CODE_CONCEPTS
        ],
        "prompts": {name: f"[{name}]" for name in ModePrompts.__struct_fields__},
    }


def _write(files: _Files, file_id: str, content: object) -> None:
    """Text arrives as UTF-8 bytes and objects as decoded dicts: both forms a lookup may give."""
    if isinstance(content, str):
        files[file_id] = content.encode()
    elif isinstance(content, bytes | dict):
        files[file_id] = content
    else:
        files[file_id] = json.dumps(content)


def _resolve(mode_id: str, files: _Files) -> Mode:
    def lookup(file_id: str) -> ModeFile:
        if file_id not in files:
            raise ModeNotFoundError(f"mode file {file_id}.json not found (searched memory)")
        return ModeFile(source=f"memory/{file_id}.json", content=files[file_id])

    return resolve_mode(mode_id, lookup)


@pytest.fixture(name="files")
def _fix_files() -> _Files:
    """Mode files by id, holding only a `code` document."""
    return {"code": json.dumps(_code_data())}


def test_later_override_wins_and_objects_merge_key_by_key(files: _Files) -> None:
    _write(files, "code--b", {"name": "B", "prompts": {"footer": "B", "summary_footer": "b"}})
    _write(files, "code--c", {"prompts": {"footer": "C"}})
    code = _resolve("code", files)
    bc, cb = _resolve("code--b--c", files), _resolve("code--c--b", files)
    assert (bc.id, bc.name, bc.prompts.footer, bc.prompts.summary_footer) == (
        "code--b--c",
        "B",
        "C",
        "b",
    )
    assert (cb.id, cb.prompts.footer) == ("code--c--b", "B")
    assert bc.prompts.system_identity == code.prompts.system_identity


def test_override_arrays_replace_the_parents_wholesale(files: _Files) -> None:
    only = {"id": "only", "label": "Only", "description": "d", "emoji": "*", "work_emoji": "*"}
    _write(files, "code--one", {"observation_types": [only]})
    mode = _resolve("code--one", files)
    assert mode.type_ids == ("only",)
    assert mode.concept_ids == CODE_CONCEPTS


def test_merge_leaves_both_inputs_as_they_were() -> None:
    base = {"a": {"x": 1, "y": [1]}, "b": 2}
    override = {"a": {"y": [2], "z": 3}, "b": {"c": 4}}
    merged = merge_mode_data(base, override)
    assert merged == {"a": {"x": 1, "y": [2], "z": 3}, "b": {"c": 4}}
    assert base == {"a": {"x": 1, "y": [1]}, "b": 2}
    assert override == {"a": {"y": [2], "z": 3}, "b": {"c": 4}}


@pytest.mark.parametrize("content", ['{"name": "x"}', b'{"name": "x"}', {"name": "x"}])
def test_a_file_is_parsed_from_text_bytes_or_a_decoded_object(
    content: str | bytes | dict[str, Any],
) -> None:
    assert parse_mode_file(ModeFile(source="m.json", content=content)) == {"name": "x"}


def _fallback_cases() -> list[tuple[str, str, object, str, str]]:
    # (case, file written, its content, requested id, text the warning must contain)
    bad_json = '{\n  "prompts": {\n    "footer": "x",\n  }\n}'
    return [
        ("missing plain", "unused", {}, "foo", "foo.json"),
        ("missing override", "unused", {}, "code--nope", "code--nope.json"),
        ("broken plain", "foo", "{", "foo", "foo.json"),
        ("syntax error", "code--x", bad_json, "code--x", "line 4, column 3"),
        ("not utf-8", "code--x", b'{"name": "\xff"}', "code--x", "is unreadable"),
        ("prompts null", "code--x", {"prompts": None}, "code--x", "$.prompts"),
        ("retyped prompt", "code--x", {"prompts": {"footer": 5}}, "code--x", "$.prompts.footer"),
        ("retyped types", "code--x", {"observation_types": "x"}, "code--x", "observation_types"),
        ("unknown prompt", "code--x", {"prompts": {"fotoer": "x"}}, "code--x", "fotoer"),
        ("unknown field", "code--x", {"promts": {"footer": "x"}}, "code--x", "promts"),
        ("numeric override", "code--x", 5, "code--x", "expected a JSON object"),
        ("null override", "code--x", None, "code--x", "expected a JSON object"),
        ("no types", "code--x", {"observation_types": []}, "code--x", "without observation types"),
        (
            "duplicate concepts",
            "code--x",
            {"observation_concepts": [CONCEPT, CONCEPT]},
            "code--x",
            "unique",
        ),
        ("id in file", "code--x", {"id": "other"}, "code--x", "'id'"),
    ]


@pytest.mark.parametrize(
    ("file_id", "content", "mode_id", "expected"),
    [case[1:] for case in _fallback_cases()],
    ids=[case[0] for case in _fallback_cases()],
)
def test_unusable_file_falls_back_to_the_parent_with_a_warning(
    files: _Files, file_id: str, content: object, mode_id: str, expected: str
) -> None:
    if file_id != "unused":
        _write(files, file_id, content)
    mode = _resolve(mode_id, files)
    assert mode.id == "code"
    assert mode.prompts == _resolve("code", files).prompts
    assert len(mode.warnings) == 1
    assert expected in mode.warnings[0]
    assert f"{file_id if file_id != 'unused' else mode_id}.json" in mode.warnings[0]


def test_json_syntax_error_names_the_source_line_and_column(files: _Files) -> None:
    _write(files, "code", '{\n  "name": "x",\n  oops\n}')
    with pytest.raises(ModeError) as caught:
        _resolve("code", files)
    message = str(caught.value)
    assert "memory/code.json" in message
    assert "line 3, column 3" in message


def test_failed_override_keeps_earlier_overrides_and_later_ones_still_apply(
    files: _Files,
) -> None:
    _write(files, "code--b", {"prompts": {"footer": "B"}})
    _write(files, "code--bad", {"prompts": None})
    _write(files, "code--c", {"prompts": {"summary_footer": "C"}})
    mode = _resolve("code--b--bad--c", files)
    assert (mode.id, mode.prompts.footer, mode.prompts.summary_footer) == ("code--b--c", "B", "C")
    assert len(mode.warnings) == 1
    assert "code--bad.json" in mode.warnings[0]
    assert "'code--b' without it" in mode.warnings[0]


def test_missing_parent_falls_back_to_code_and_its_override(files: _Files) -> None:
    _write(files, "code--ja", {"name": "Japanese", "prompts": {"footer": "ja"}})
    mode = _resolve("nosuch--ja", files)
    assert mode.id == "code--ja"
    assert mode.prompts == _resolve("code--ja", files).prompts
    assert len(mode.warnings) == 1
    assert "nosuch.json" in mode.warnings[0]
    assert mode.warnings[0].endswith("; falling back to mode 'code'")


def test_plain_mode_other_than_code_loads_from_its_own_file(files: _Files) -> None:
    data = _code_data()
    data["name"] = "Research"
    data["observation_types"] = data["observation_types"][4:5]
    _write(files, "research", data)
    _write(files, "research--de", {"prompts": {"footer": "Fuß"}})
    mode = _resolve("research--de", files)
    assert (mode.id, mode.name, mode.type_ids, mode.warnings) == (
        "research--de",
        "Research",
        ("discovery",),
        (),
    )
    assert mode.prompts.footer == "Fuß"


def test_the_lookups_own_error_for_a_missing_code_passes_through(files: _Files) -> None:
    del files["code"]
    for requested in ("code", "foo", "code--ja"):
        with pytest.raises(ModeNotFoundError, match=r"^mode file code\.json not found"):
            _resolve(requested, files)


def test_a_lookup_that_cannot_read_code_is_fatal_with_its_reason() -> None:
    def lookup(file_id: str) -> ModeFile:
        raise ModeError(f"mode file {file_id}.json is unreadable: disk on fire")

    with pytest.raises(ModeError) as caught:
        resolve_mode("foo", lookup)
    assert str(caught.value) == (
        "mode file code.json is unreadable: disk on fire"
        " (the fallback mode must load; fix or restore it)"
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{", "line 1, column 2"),
        ('{"prompts": null}', "$.prompts"),
        ('{"name": "x"}', "missing required field"),
        ("[]", "expected a JSON object"),
    ],
)
def test_broken_code_json_is_fatal_with_the_reason(
    files: _Files, content: str, expected: str
) -> None:
    _write(files, "code", content)
    for requested in ("code", "foo", "code--ja"):
        with pytest.raises(ModeError, match=r"code\.json") as caught:
            _resolve(requested, files)
        assert expected in str(caught.value)
        assert "(the fallback mode must load; fix or restore it)" in str(caught.value)


@pytest.mark.parametrize(
    "mode_id",
    ["", "Code", "code-", "-code", "code--", "code---ja", "code ja", "../code", "code--JA", "c_d"],
)
def test_invalid_mode_id_is_rejected_naming_the_id_and_grammar(files: _Files, mode_id: str) -> None:
    with pytest.raises(ModeError, match="invalid mode id") as caught:
        _resolve(mode_id, files)
    assert repr(mode_id) in str(caught.value)
    assert "'--'" in str(caught.value)


@pytest.mark.parametrize("mode_id", ["code--pt-br", "a1--b-2--c", "x9"])
def test_valid_mode_ids_are_accepted(files: _Files, mode_id: str) -> None:
    assert _resolve(mode_id, files).id == "code"
