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
# Only obvious placeholders: a real password may start with `$`, hold braces, or begin
# with "your" or "sample" (`$ecretPass99`, `{Kx8!mQ2#pL}`, `yourMum-Rocks-1999`).
_PLACEHOLDER_SHAPE = re.compile(
    r"""
      \$\{[^{}]*\}? | \$\(.*\)?                 # ${VAR}, $(command)
    | \$(?:[A-Z_][A-Z0-9_]*|[a-z_][a-z0-9_]*)  # $VAR, $var; not $ecretPass99
    | %[A-Za-z_][A-Za-z0-9_]*%               # %VAR%
    | \{\{.*\}\} | \{%.*%\}                   # {{ template }}, {% tag %}
    | \{(?:[A-Z_][A-Z0-9_.]* | [a-z_][a-z0-9_.]*(?:[A-Z][a-z0-9_.]+)*)\}
                                             # {NAME}, {name}, {db.userPassword}; not {qb6iFBoF}
    | <[A-Za-z][\w .-]*> | \[REDACTED:[a-z-]+\]  # <your-token>, our marker
    | (?:your|example|sample|dummy|fake|placeholder|replace|insert|enter)
      (?:[-_ ]|(?-i:[A-Z]))[A-Za-z_ -]*       # YOUR_API_KEY, your-secret-here: words only
    | [x*.•_ -]+                             # a mask: xxxx, ****, ••••
    | .*(?:\.\.\.|…).*                       # an elided value: sk-abc...
    | -?[0-9]{1,4}(?:\.[0-9]+)?              # a small number is a count, not a secret
    """,
    re.VERBOSE | re.DOTALL,
)
_CASELESS_SHAPE = re.compile(
    r"(?:your|example|sample|dummy|fake|placeholder|replace|insert|enter)[-_ ][A-Za-z_ -]*"
    r"|x{3,}.*|[x*]+",
    re.IGNORECASE | re.DOTALL,
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
    if _CASELESS_SHAPE.fullmatch(text):
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
