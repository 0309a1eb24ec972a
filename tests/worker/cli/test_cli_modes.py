"""`memq modes list|show` through typer's runner and once as the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from worker.cli.app import app

RUNNER = CliRunner()


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MEMQ_") or name == "CLAUDE_MEM_MODE":
            monkeypatch.delenv(name)


def _prompts(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["prompts"]
    return data


def _user_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    directory = tmp_path / "user-modes"
    directory.mkdir()
    for mode_id, text in files.items():
        (directory / f"{mode_id}.json").write_text(text, encoding="utf-8")
    return directory


@pytest.mark.parametrize("as_json", [False, True])
def test_list_prints_every_bundled_mode(modes_dir: Path, as_json: bool) -> None:
    result = RUNNER.invoke(app, ["modes", "list", *(["--json"] if as_json else [])])
    expected = sorted(p.stem for p in modes_dir.glob("*.json"))
    assert result.exit_code == 0, result.stderr
    ids = json.loads(result.stdout) if as_json else result.stdout.splitlines()
    assert ids == expected
    assert "code--ja" in ids


def test_show_prints_the_merged_mode_without_warnings(modes_dir: Path) -> None:
    result = RUNNER.invoke(app, ["modes", "show", "code--de"])
    assert (result.exit_code, result.stderr) == (0, "")
    shown = json.loads(result.stdout)
    assert shown["id"] == "code--de"
    assert "warnings" not in shown
    de = _prompts(modes_dir / "code--de.json")
    assert shown["prompts"]["xml_title_placeholder"] == de["xml_title_placeholder"]
    code = _prompts(modes_dir / "code.json")
    assert shown["prompts"]["system_identity"] == code["system_identity"]


def test_show_defaults_to_the_configured_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMQ_MODE", "code--chill")
    result = RUNNER.invoke(app, ["modes", "show"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["id"] == "code--chill"


def test_show_reports_each_fallback_on_stderr() -> None:
    result = RUNNER.invoke(app, ["modes", "show", "nosuch--nada"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["id"] == "code"
    lines = result.stderr.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("memq: warning: ") for line in lines)
    assert "nosuch.json" in lines[0]
    assert "code--nada.json" in lines[1]


def test_user_modes_dir_adds_and_overrides_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = _user_dir(
        tmp_path,
        {
            "code--mine": '{"name": "Mine", "prompts": {"footer": "my footer"}}',
            "code--ja": '{"name": "My Japanese"}',
        },
    )
    monkeypatch.setenv("MEMQ_MODES_DIR", str(user))
    listed = RUNNER.invoke(app, ["modes", "list", "--json"])
    assert "code--mine" in json.loads(listed.stdout)
    mine = json.loads(RUNNER.invoke(app, ["modes", "show", "code--mine"]).stdout)
    assert (mine["name"], mine["prompts"]["footer"]) == ("Mine", "my footer")
    ja = json.loads(RUNNER.invoke(app, ["modes", "show", "code--ja"]).stdout)
    assert ja["name"] == "My Japanese"


def test_missing_user_modes_dir_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMQ_MODES_DIR", str(tmp_path / "absent"))
    result = RUNNER.invoke(app, ["modes", "show", "code"])
    assert result.exit_code == 0
    assert result.stderr.startswith("memq: warning: MEMQ_MODES_DIR")


@pytest.mark.parametrize(
    ("files", "args", "expected"),
    [
        ({"code": '{\n  "name": \n}'}, ["modes", "show", "code--ja"], "line 3, column 1"),
        ({"code": '{"prompts": null}'}, ["modes", "show", "code"], "$.prompts"),
        ({}, ["modes", "show", "Code"], "invalid mode id 'Code'"),
    ],
)
def test_unusable_mode_exits_2_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    args: list[str],
    expected: str,
) -> None:
    monkeypatch.setenv("MEMQ_MODES_DIR", str(_user_dir(tmp_path, files)))
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("memq: ")
    assert expected in lines[0]


def _console_script() -> str:
    exe = shutil.which("memq", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("the memq console script is not installed next to this Python")
    return exe


def test_installed_console_script_shows_composed_modes(modes_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMQ_", "CLAUDE_MEM_"))}
    done = subprocess.run(
        [_console_script(), "modes", "show", "code--ja--chill"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    prompts = json.loads(done.stdout)["prompts"]
    ja = _prompts(modes_dir / "code--ja.json")
    chill = _prompts(modes_dir / "code--chill.json")
    assert prompts["xml_summary_learned_placeholder"] == ja["xml_summary_learned_placeholder"]
    assert prompts["recording_focus"] == chill["recording_focus"]
