"""Settings: one object from a TOML file and MEMQ_* variables; errors name the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.secret import Secret
from worker.settings import Settings, load_settings, read_settings_file, settings_variables

SETTINGS_DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_defaults_give_a_working_single_machine() -> None:
    s = load_settings({})
    assert s.redis_url is None  # managed local redis-server
    assert s.prefix == "memq"
    assert s.mode == "code"
    assert s.observer_provider is None


@pytest.mark.parametrize(
    ("environ", "provider"),
    [
        ({"ANTHROPIC_API_KEY": "k"}, "anthropic"),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "openai"),
        ({"OPENAI_API_KEY": "k"}, "openai"),
        ({"ANTHROPIC_API_KEY": "k", "MEMQ_OBSERVER": "openai"}, "openai"),
        ({"ANTHROPIC_API_KEY": ""}, None),
    ],
)
def test_observer_provider_follows_the_sdk_variables(
    environ: dict[str, str], provider: str | None
) -> None:
    assert load_settings(environ).observer_provider == provider


def test_environment_values_are_coerced_and_win_over_the_file() -> None:
    s = load_settings(
        {"MEMQ_BATCH_MAX_EVENTS": "3", "MEMQ_TEMPERATURE": "0.5"},
        {"batch_max_events": 5, "prefix": "tenant-a"},
    )
    assert (s.batch_max_events, s.temperature, s.prefix) == (3, 0.5, "tenant-a")


def test_claude_mem_mode_is_honoured_and_memq_mode_wins() -> None:
    assert load_settings({"CLAUDE_MEM_MODE": "code--ja"}).mode == "code--ja"
    both = {"CLAUDE_MEM_MODE": "code--ja", "MEMQ_MODE": "code--chill"}
    assert load_settings(both).mode == "code--chill"


def test_the_opencode_plugins_variable_is_not_an_unknown_setting() -> None:
    # `memq hook opencode` and `memq mcp` run in OpenCode's environment, where it may be set.
    s = load_settings({"MEMQ_AGENT_URL": "http://127.0.0.1:9000", "MEMQ_AGENT_PORT": "9000"})
    assert s.agent_port == 9000


@pytest.mark.parametrize(
    ("environ", "fragment"),
    [
        ({"MEMQ_BATCH_MAX_EVENTS": "0"}, "MEMQ_BATCH_MAX_EVENTS"),
        ({"MEMQ_JOB_TIMEOUT_S": "soon"}, "MEMQ_JOB_TIMEOUT_S"),
        ({"MEMQ_PREFIX": "a b"}, "MEMQ_PREFIX"),
        ({"MEMQ_OBSERVER": "gemini"}, "MEMQ_OBSERVER"),
        ({"MEMQ_BATCH_MAX_EVNTS": "3"}, "unknown setting MEMQ_BATCH_MAX_EVNTS"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(
    environ: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(environ)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_secrets_never_show_in_a_repr() -> None:
    s = load_settings({"ANTHROPIC_API_KEY": "sk-ant-very-secret"})
    assert isinstance(s.anthropic_api_key, Secret)
    assert s.anthropic_api_key.reveal() == "sk-ant-very-secret"
    assert "very-secret" not in repr(s)


def test_settings_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "memq.toml"
    bad.write_text("prefix = [unclosed\n")
    with pytest.raises(ConfigError, match=r"memq\.toml is not valid TOML"):
        read_settings_file(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        read_settings_file(tmp_path / "missing.toml")
    good = tmp_path / "ok.toml"
    good.write_text('prefix = "tenant-b"\nbatch_max_events = 4\n')
    assert load_settings({}, read_settings_file(good)).batch_max_events == 4


def test_settings_reference_table_matches_the_settings_object() -> None:
    rows = re.findall(r"^\| (`[A-Z_]+`.*?) \|", SETTINGS_DOC.read_text(), flags=re.MULTILINE)
    documented = {name for row in rows for name in re.findall(r"`([A-Z][A-Z_]+)`", row)}
    documented.discard("CLAUDE_MEM_MODE")  # the original's name for MEMQ_MODE
    expected = set(settings_variables().values()) | {"MEMQ_CONFIG"}
    assert documented == expected, (
        f"docs/settings.md lacks {sorted(expected - documented)}; "
        f"docs/settings.md has unknown {sorted(documented - expected)}"
    )


def test_every_field_has_a_variable() -> None:
    assert set(settings_variables()) == set(Settings.__struct_fields__)


def test_a_setting_no_longer_read_is_skipped_with_one_warning_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="worker.settings"):
        s = load_settings({"MEMQ_SPOOL_MAX_BYTES": "1", "MEMQ_PREFIX": "t"}, {"history_chars": 5})
    assert s.prefix == "t"
    lines = [r.getMessage() for r in caplog.records if r.name == "worker.settings"]
    assert len(lines) == 2
    assert lines[0].startswith("MEMQ_HISTORY_CHARS is set but no longer read: ")
    assert lines[1].startswith("MEMQ_SPOOL_MAX_BYTES is set but no longer read: ")
    with pytest.raises(ConfigError, match="unknown setting MEMQ_SPOOL_MAX_BYTE"):
        load_settings({"MEMQ_SPOOL_MAX_BYTE": "1"})  # a typo is still refused
