"""Reading and writing an agent's JSON settings, and memq's entry in its MCP server table."""

from __future__ import annotations

import json
import re
from typing import Any

from worker.ops.install.hook_entries import Json, ShapeError

_INDENT = re.compile(rb"\n( +|\t)\S")


class _Missing:
    """A key one side does not have."""


_MISSING = _Missing()


def parse_object(text: bytes | None) -> Json:
    """The settings object in `text`; a missing or empty file is `{}`.

    Raises:
        ShapeError: not JSON (with line and column), or not an object.
    """
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ShapeError(f"not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ShapeError("not a JSON object")
    return data


def render_object(data: Json, like: bytes | None) -> bytes:
    """`data` as JSON laid out as the file it replaces was: its indentation (two spaces for a
    new file), one line if it was one line, and its final newline or none."""
    text = like or b""
    if text.strip() and b"\n" not in text.strip():
        rendered = json.dumps(data, ensure_ascii=False)
    else:
        indent: int | str = 2
        found = _INDENT.search(text)
        if found is not None:
            indent = "\t" if found.group(1) == b"\t" else len(found.group(1))
        rendered = json.dumps(data, indent=indent, ensure_ascii=False)
    newline = "\n" if like is None or like.endswith(b"\n") else ""
    return (rendered + newline).encode()


def changed_keys(before: Json, after: Json) -> list[str]:
    """What differs, two levels deep: `+ hooks.Stop`, `~ hooks.PostToolUse`, `- mcpServers.memq`."""
    lines: list[str] = []
    for key in [*after, *(k for k in before if k not in after)]:
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if old == new:
            continue
        if isinstance(old, dict | _Missing) and isinstance(new, dict | _Missing):
            old_table = old if isinstance(old, dict) else {}
            new_table = new if isinstance(new, dict) else {}
            for sub in [*new_table, *(k for k in old_table if k not in new_table)]:
                was, now = old_table.get(sub, _MISSING), new_table.get(sub, _MISSING)
                if was != now:
                    lines.append(_marked(f"{key}.{sub}", was, now))
        else:
            lines.append(_marked(key, old, new))
    return lines


def _marked(key: str, old: object, new: object) -> str:
    mark = "+" if old is _MISSING else "-" if new is _MISSING else "~"
    return f"{mark} {key}"


def put_server(settings: Json, table: str, name: str, entry: Json) -> Json:
    """`settings` with `entry` as `settings[table][name]`; the user's other keys in it stay."""
    servers = _table(settings, table)
    existing = servers.get(name)
    merged = {**existing, **entry} if isinstance(existing, dict) else entry
    return {**settings, table: {**servers, name: merged}}


def drop_server(settings: Json, table: str, name: str) -> Json:
    """`settings` without `settings[table][name]`; a table that held only it goes too."""
    servers = _table(settings, table)
    if name not in servers:
        return settings
    rest: dict[str, Any] = {key: value for key, value in servers.items() if key != name}
    if rest:
        return {**settings, table: rest}
    return {key: value for key, value in settings.items() if key != table}


def _table(settings: Json, table: str) -> Json:
    servers = settings.get(table, {})
    if not isinstance(servers, dict):
        raise ShapeError(f"`{table}` is not an object")
    return servers
