"""memq's entries in an agent's `hooks` object (Claude Code's shape, which Codex and Gemini share).

`{"hooks": {"<Event>": [{"matcher": "*", "hooks": [<handler>, …]}, …]}}`. A handler is
memq's when it runs `<…/>memq hook <agent>` or posts to `…/hooks/<agent>`; every other
handler, group and event is the user's and is kept as it is.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any
from urllib.parse import urlsplit

import msgspec

Json = dict[str, Any]


class ShapeError(Exception):
    """A settings value memq must edit has the wrong JSON type; the message names its key."""


class HookSpec(msgspec.Struct, frozen=True):
    """memq's one handler for one event, in a group of its own."""

    event: str
    handler: Json
    matcher: str | None = None

    def group(self) -> Json:
        """The group as it is written: `{"matcher": …, "hooks": [handler]}`."""
        if self.matcher is None:
            return {"hooks": [self.handler]}
        return {"matcher": self.matcher, "hooks": [self.handler]}


def command_line(memq: str, agent: str) -> str:
    """The shell command of memq's hook: the full memq path, quoted for the shell."""
    return f"{shlex.quote(memq)} hook {agent}"


def is_memq_handler(handler: object, agent: str) -> bool:
    """Whether `handler` is one memq writes for `agent` (any memq path, command or HTTP)."""
    if not isinstance(handler, dict):
        return False
    if handler.get("type") == "http":
        url = handler.get("url")
        return isinstance(url, str) and urlsplit(url).path.rstrip("/") == f"/hooks/{agent}"
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) == 3 and PurePath(words[0]).name == "memq" and words[1:] == ["hook", agent]


def install_hooks(settings: Json, specs: Sequence[HookSpec], agent: str) -> Json:
    """`settings` with exactly memq's `specs` in `hooks`; unchanged where they already are."""
    hooks = _hooks_of(settings)
    wanted = {spec.event: spec for spec in specs}
    result: Json = {}
    for event, groups in hooks.items():
        _check_groups(event, groups)
        spec = wanted.pop(event, None)
        if spec is not None and _holds_only(groups, spec, agent):
            result[event] = groups
            continue
        kept = _without_memq(groups, agent)
        if spec is not None:
            kept.append(spec.group())
        if kept or not groups:
            result[event] = kept
    for event, spec in wanted.items():
        result[event] = [spec.group()]
    return {**settings, "hooks": result}


def uninstall_hooks(settings: Json, agent: str) -> Json:
    """`settings` without any memq handler for `agent`; what only held memq's goes too."""
    if "hooks" not in settings:
        return settings
    hooks = _hooks_of(settings)
    result: Json = {}
    for event, groups in hooks.items():
        _check_groups(event, groups)
        kept = _without_memq(groups, agent)
        if kept or not groups:
            result[event] = kept
    if result or not hooks:
        return {**settings, "hooks": result}
    return {key: value for key, value in settings.items() if key != "hooks"}


def _hooks_of(settings: Json) -> Json:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ShapeError("`hooks` is not an object")
    return hooks


def _check_groups(event: str, groups: object) -> None:
    if not isinstance(groups, list):
        raise ShapeError(f"`hooks.{event}` is not a list")


def _holds_only(groups: list[Any], spec: HookSpec, agent: str) -> bool:
    """The event has memq's group as written and no other memq handler."""
    handlers = [h for g in groups if isinstance(g, dict) for h in _handlers(g)]
    return spec.group() in groups and sum(is_memq_handler(h, agent) for h in handlers) == 1


def _without_memq(groups: list[Any], agent: str) -> list[Any]:
    kept: list[Any] = []
    for group in groups:
        if not isinstance(group, dict):
            kept.append(group)
            continue
        handlers = _handlers(group)
        others = [h for h in handlers if not is_memq_handler(h, agent)]
        if len(others) == len(handlers):
            kept.append(group)
        elif others:
            kept.append({**group, "hooks": others})
    return kept


def _handlers(group: Json) -> list[Any]:
    handlers = group.get("hooks", [])
    return handlers if isinstance(handlers, list) else []
