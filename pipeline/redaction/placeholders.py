"""Values that are obviously no secret: empty, a reference, a template, a mask, a type, a count."""

from __future__ import annotations

import re

from pipeline.redaction.names import is_secret_name

_PLACEHOLDERS = frozenset(
    {"null", "none", "nil", "undefined", "true", "false", "yes", "no", "on", "off"}
    | {"changeme", "change-me", "change_me", "changeit", "redacted", "hidden", "secret"}
    | {"password", "passwd", "token", "placeholder", "example", "todo", "tbd", "n/a"}
    | {"str", "string", "bytes", "int", "number", "any", "unknown", "object", "secretstr"}
)
_PLACEHOLDER_SHAPE = re.compile(
    r"""
      \$\S*                                  # $VAR, ${VAR}, $(command)
    | %[A-Za-z_][A-Za-z0-9_]*%               # %VAR%
    | \{.*\} | <.*> | \[REDACTED:[a-z-]+\]   # {{ template }}, <your-token>, our marker
    | (?:your|example|sample|dummy|fake|placeholder|replace|insert|enter)(?:[-_ ]|(?-i:[A-Z])).*
    | [x*.•_ -]+                             # a mask: xxxx, ****, ••••
    | .*(?:\.\.\.|…).*                       # an elided value: sk-abc...
    | -?[0-9]{1,4}(?:\.[0-9]+)?              # a small number is a count, not a secret
    """,
    re.VERBOSE | re.IGNORECASE | re.DOTALL,
)
_CODE_OBJECTS = frozenset(
    {"self", "this", "os", "process", "settings", "config", "cfg", "conf", "env", "environ"}
    | {"options", "opts", "args", "params", "props", "ctx", "request", "req", "secrets"}
)
_CALL_OR_INDEX = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*[(\[]")
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def is_placeholder(value: str, *, bare: bool) -> bool:
    """Whether a value is obviously not a secret; `bare` for an unquoted value in code."""
    text = value.strip()
    if not text or text.lower() in _PLACEHOLDERS or _PLACEHOLDER_SHAPE.fullmatch(text):
        return True
    if not bare:
        return False
    # A bare value in code is usually an expression: a call, an index, an attribute of a
    # config object, or a variable named like a secret (`password=password`, `key=api_key`).
    if _CALL_OR_INDEX.match(text):
        return True
    if _DOTTED_NAME.fullmatch(text) is None:
        return False
    head, _, last = text.rpartition(".")
    return head.split(".")[0].lower() in _CODE_OBJECTS or is_secret_name(last)
