"""Mode files on disk: the bundled ones, search order, listing, read errors, fatal code.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pipeline import ModeError, ModeNotFoundError, ModePrompts
from pipeline.prompting.mode_files import BUNDLED_MODES_DIR, list_modes, load_mode
from tests.support.code_mode import CODE_CONCEPTS, CODE_TYPES

LANGUAGES = ("de", "es", "fr", "ja", "ko", "pt-br", "ru", "zh")
PLACEHOLDER_KEYS = tuple(f for f in ModePrompts.__struct_fields__ if f.startswith("xml_"))


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _write(directory: Path, mode_id: str, content: object) -> Path:
    path = directory / f"{mode_id}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        text = content if isinstance(content, str) else json.dumps(content)
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(name="tmp_modes")
def _fix_tmp_modes(tmp_path: Path, modes_dir: Path) -> Path:
    """A private modes dir holding only a copy of the bundled code.json."""
    directory = tmp_path / "modes"
    directory.mkdir()
    shutil.copy(modes_dir / "code.json", directory / "code.json")
    return directory


def _override_ids(modes_dir: Path) -> list[str]:
    return sorted(p.stem for p in modes_dir.glob("*--*.json"))


def test_bundled_code_mode_has_the_nine_types_and_seven_concepts_in_order(
    modes_dir: Path,
) -> None:
    mode = load_mode("code", modes_dir)
    assert (mode.id, mode.warnings) == ("code", ())
    assert mode.type_ids == CODE_TYPES
    assert mode.concept_ids == CODE_CONCEPTS


def test_bundled_code_prompts_name_every_type_and_concept_in_their_guidance(
    modes_dir: Path,
) -> None:
    prompts = load_mode("code", modes_dir).prompts
    assert all(type_id in prompts.type_guidance for type_id in CODE_TYPES)
    assert all(concept in prompts.concept_guidance for concept in CODE_CONCEPTS)
    assert "memq" in prompts.system_identity
    assert "<observed_from_primary_session>" in prompts.system_identity
    assert 'reason="oversize"' in prompts.observation_instruction
    assert "<skip_summary" in prompts.summary_skip_guidance


def test_bundled_mode_files_all_exist_as_expected(modes_dir: Path) -> None:
    expected = ["code", "code--chill", *(f"code--{lang}" for lang in LANGUAGES)]
    assert list_modes(modes_dir) == sorted(expected)


@pytest.mark.parametrize("mode_id", _override_ids(Path(__file__).parents[3] / "modes"))
def test_bundled_override_only_overrides_existing_code_keys_with_text(
    modes_dir: Path, mode_id: str
) -> None:
    parent, _, _ = mode_id.partition("--")
    override = _read(modes_dir / f"{mode_id}.json")
    code = _read(modes_dir / "code.json")
    assert parent == "code"
    assert set(override) == {"name", "prompts"}
    assert set(override["prompts"]) <= set(code["prompts"])
    assert all(isinstance(v, str) and v.strip() for v in override["prompts"].values())
    mode = load_mode(mode_id, modes_dir)
    assert (mode.id, mode.warnings, mode.name) == (mode_id, (), override["name"])


@pytest.mark.parametrize("lang", LANGUAGES)
def test_language_override_translates_placeholders_and_adds_a_language_requirement(
    modes_dir: Path, lang: str
) -> None:
    code = load_mode("code", modes_dir).prompts
    mode = load_mode(f"code--{lang}", modes_dir).prompts
    overridden = set(_read(modes_dir / f"code--{lang}.json")["prompts"])
    assert overridden == {
        "footer",
        "continuation_instruction",
        "summary_footer",
        *PLACEHOLDER_KEYS,
    }
    for key in PLACEHOLDER_KEYS:
        assert getattr(mode, key) != getattr(code, key), key
        assert getattr(mode, key).startswith("[")
    for key in ("footer", "continuation_instruction", "summary_footer"):
        assert getattr(mode, key).startswith(getattr(code, key))
        assert "LANGUAGE REQUIREMENT" in getattr(mode, key)


def test_chill_and_language_compose_left_to_right(modes_dir: Path) -> None:
    ja = _read(modes_dir / "code--ja.json")["prompts"]
    chill = _read(modes_dir / "code--chill.json")["prompts"]
    mode = load_mode("code--ja--chill", modes_dir)
    assert (mode.id, mode.warnings, mode.name) == (
        "code--ja--chill",
        (),
        "Code Development (Chill)",
    )
    assert mode.prompts.xml_title_placeholder == ja["xml_title_placeholder"]
    assert mode.prompts.recording_focus == chill["recording_focus"]
    assert load_mode("code--chill--ja", modes_dir).name == "Code Development (Japanese)"


@pytest.mark.parametrize(
    ("file_id", "content", "mode_id", "expected"),
    [
        ("unused", {}, "foo", "foo.json"),
        ("unused", {}, "code--nope", "code--nope.json"),
        ("foo", "{", "foo", "foo.json"),
        ("code--x", '{\n  "prompts": {\n    "footer": "x",\n  }\n}', "code--x", "line 4, column 3"),
        ("code--x", b'{"name": "\xff"}', "code--x", "is unreadable"),
    ],
    ids=["missing plain", "missing override", "broken plain", "syntax error", "not utf-8"],
)
def test_unusable_file_falls_back_to_the_parent_with_a_warning(
    tmp_modes: Path, file_id: str, content: object, mode_id: str, expected: str
) -> None:
    if file_id != "unused":
        _write(tmp_modes, file_id, content)
    mode = load_mode(mode_id, tmp_modes)
    assert mode.id == "code"
    assert mode.prompts == load_mode("code", tmp_modes).prompts
    assert len(mode.warnings) == 1
    assert expected in mode.warnings[0]
    assert f"{file_id if file_id != 'unused' else mode_id}.json" in mode.warnings[0]


def test_missing_file_warning_names_every_searched_directory(
    tmp_modes: Path, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    (warning,) = load_mode("code--nope", tmp_modes, extra_dirs=[user]).warnings
    assert f"not found (searched {user}, {tmp_modes})" in warning
    assert warning.endswith("; using mode 'code' without it")


def test_json_syntax_error_names_file_line_and_column(tmp_modes: Path) -> None:
    _write(tmp_modes, "code", '{\n  "name": "x",\n  oops\n}')
    with pytest.raises(ModeError) as caught:
        load_mode("code", tmp_modes)
    message = str(caught.value)
    assert str(tmp_modes / "code.json") in message
    assert "line 3, column 3" in message


def test_unreadable_code_json_is_fatal_naming_its_path(tmp_modes: Path) -> None:
    _write(tmp_modes, "code", b"\xff\xfe{")
    with pytest.raises(ModeError, match="is unreadable") as caught:
        load_mode("code--ja", tmp_modes)
    assert str(tmp_modes / "code.json") in str(caught.value)
    assert str(caught.value).endswith("(the fallback mode must load; fix or restore it)")


def test_missing_parent_falls_back_to_code_and_its_override(modes_dir: Path) -> None:
    mode = load_mode("nosuch--ja", modes_dir)
    assert mode.id == "code--ja"
    assert mode.prompts == load_mode("code--ja", modes_dir).prompts
    assert len(mode.warnings) == 1
    assert "nosuch.json" in mode.warnings[0]


def test_extra_dirs_are_searched_before_the_modes_dir(tmp_modes: Path, tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    _write(tmp_modes, "code--x", {"name": "bundled x"})
    _write(tmp_modes, "code--y", {"name": "bundled y"})
    _write(user, "code--x", {"name": "user x"})
    _write(user, "code--z", {"name": "user z"})
    assert load_mode("code--x", tmp_modes, extra_dirs=[user]).name == "user x"
    assert load_mode("code--y", tmp_modes, extra_dirs=[user]).name == "bundled y"
    assert load_mode("code--z", tmp_modes).warnings != ()
    assert list_modes(tmp_modes, extra_dirs=[user]) == ["code", "code--x", "code--y", "code--z"]


def test_user_code_json_replaces_the_bundled_one(tmp_modes: Path, tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    data = _read(tmp_modes / "code.json")
    data["name"] = "Mine"
    _write(user, "code", data)
    assert load_mode("code", tmp_modes, extra_dirs=[user]).name == "Mine"


def test_missing_code_json_is_fatal_and_says_to_reinstall(tmp_path: Path) -> None:
    with pytest.raises(ModeNotFoundError, match="reinstall memq") as caught:
        load_mode("foo--ja", tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_invalid_mode_id_is_rejected_before_any_file_is_looked_for(tmp_path: Path) -> None:
    with pytest.raises(ModeError, match=r"invalid mode id '\.\./code'"):
        load_mode("../code", tmp_path)


def test_list_modes_skips_invalid_names_and_missing_dirs(tmp_modes: Path, tmp_path: Path) -> None:
    (tmp_modes / "Bad.json").write_text("{}", encoding="utf-8")
    (tmp_modes / "notes.txt").write_text("", encoding="utf-8")
    _write(tmp_modes, "code--pt-br", {})
    assert list_modes(tmp_modes, extra_dirs=[tmp_path / "absent"]) == ["code", "code--pt-br"]


def test_default_modes_dir_is_the_bundled_one(modes_dir: Path) -> None:
    assert modes_dir == BUNDLED_MODES_DIR
    assert load_mode("code--ja") == load_mode("code--ja", modes_dir)
    assert list_modes() == list_modes(modes_dir)
