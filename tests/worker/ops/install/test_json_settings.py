"""JSON settings: parsed strictly, written back in the file's layout, servers merged."""

from __future__ import annotations

import pytest

from worker.ops.install.hook_entries import ShapeError
from worker.ops.install.json_settings import (
    changed_keys,
    drop_server,
    parse_object,
    put_server,
    render_object,
)

ENTRY = {"command": "/x/bin/memq", "args": ["mcp"]}


@pytest.mark.parametrize("text", [None, b"", b"  \n"])
def test_a_missing_or_empty_file_is_an_empty_object(text: bytes | None) -> None:
    assert parse_object(text) == {}


@pytest.mark.parametrize(
    ("text", "reason"),
    [(b'{"a": 1,', "not valid JSON .*line 1 column"), (b"[1]", "not a JSON object")],
)
def test_broken_json_is_refused(text: bytes, reason: str) -> None:
    with pytest.raises(ShapeError, match=reason):
        parse_object(text)


@pytest.mark.parametrize(
    ("like", "expected"),
    [
        (b'{\n    "a": 1\n}\n', '{\n    "a": 1,\n    "b": [\n        "\u00fc"\n    ]\n}\n'),
        (b'{\n\t"a": 1\n}', '{\n\t"a": 1,\n\t"b": [\n\t\t"\u00fc"\n\t]\n}'),
        (b'{"a": 1}', '{"a": 1, "b": ["\u00fc"]}'),
        (b'{"a": 1}\n', '{"a": 1, "b": ["\u00fc"]}\n'),
        (None, '{\n  "a": 1,\n  "b": [\n    "\u00fc"\n  ]\n}\n'),
    ],
)
def test_rendering_keeps_the_files_layout(like: bytes | None, expected: str) -> None:
    assert render_object({"a": 1, "b": ["\u00fc"]}, like) == expected.encode()


def test_put_server_keeps_other_servers_and_the_users_keys_in_memqs() -> None:
    settings = {
        "mcpServers": {"other": {"command": "o"}, "memq": {"command": "memq", "env": {"A": "1"}}}
    }
    put = put_server(settings, "mcpServers", "memq", ENTRY)
    assert put["mcpServers"]["other"] == {"command": "o"}
    assert put["mcpServers"]["memq"] == {
        "command": "/x/bin/memq",
        "env": {"A": "1"},
        "args": ["mcp"],
    }
    assert put_server(put, "mcpServers", "memq", ENTRY) == put


def test_drop_server_removes_only_memqs_and_a_table_left_empty() -> None:
    settings = {"x": 1, "mcp": {"other": {}, "memq": ENTRY}}
    assert drop_server(settings, "mcp", "memq") == {"x": 1, "mcp": {"other": {}}}
    assert drop_server({"x": 1, "mcp": {"memq": ENTRY}}, "mcp", "memq") == {"x": 1}
    assert drop_server({"x": 1}, "mcp", "memq") == {"x": 1}


def test_a_server_table_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ShapeError, match="`mcp` is not an object"):
        put_server({"mcp": []}, "mcp", "memq", ENTRY)


def test_changed_keys_lists_two_levels() -> None:
    before = {"hooks": {"Stop": [1], "Old": [2]}, "keep": 1}
    after = {"hooks": {"Stop": [1, 3], "New": [4]}, "keep": 1, "mcpServers": {"memq": {}}}
    assert changed_keys(before, after) == [
        "~ hooks.Stop", "+ hooks.New", "- hooks.Old", "+ mcpServers.memq",
    ]  # fmt: skip
    assert changed_keys({"a": 1}, {"a": 2}) == ["~ a"]
