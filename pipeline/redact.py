"""Secret redaction: find credentials in text and JSON values, replace each with a typed marker."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import msgspec


class SecretMatch(msgspec.Struct, frozen=True):
    """One secret in a text: its kind and the half-open span `[start, end)` to redact."""

    kind: str
    start: int
    end: int


_Span = tuple[int, int]
_Finder = Callable[[str], Iterator[_Span]]
_Check = Callable[[re.Match[str]], _Span | None]


def _regex(pattern: str, check: _Check) -> _Finder:
    compiled = re.compile(pattern, re.ASCII)

    def find(text: str) -> Iterator[_Span]:
        pos = 0
        while (m := compiled.search(text, pos)) is not None:
            span = check(m)
            pos = m.start() + 1 if span is None else max(m.end(), m.start() + 1)
            if span is not None:
                yield span

    return find


def _token(
    pattern: str,
    *,
    min_distinct: int = 6,
    mixed: bool = False,
    digit: bool = False,
    body_only: bool = False,
) -> _Finder:
    # Few distinct characters make a mask (`ghp_xxxx…`); `mixed` asks for upper case,
    # lower case and a digit (a weak prefix such as `sk-` needs that evidence). The whole
    # token goes, prefix included, unless only the body follows a label (`Bearer …`).
    def check(m: re.Match[str]) -> _Span | None:
        body = m.group("body")
        if len(set(body)) < min_distinct:
            return None
        if (mixed or digit) and not any(c.isdigit() for c in body):
            return None
        if mixed and (body.lower() == body or body.upper() == body):
            return None
        return m.span("body") if body_only else m.span()

    return _regex(pattern, check)


def _password_in_url(m: re.Match[str]) -> _Span | None:
    return None if _is_placeholder(m.group("pw"), bare=False) else m.span("pw")


_B64 = "A-Za-z0-9_-"  # base64url, the alphabet of most token bodies
# A pattern starts with its literal prefix (the engine then skips ahead fast) and checks
# the character before it with a look-behind that excludes the body's alphabet: inside a
# run of token characters a match is tried once, so every scan stays linear.
_TOKEN_FINDERS: tuple[tuple[str, _Finder], ...] = (
    (
        "anthropic-api-key",
        _token(rf"sk-ant-(?<![{_B64}]sk-ant-)(?P<body>[{_B64}]{{32,}})", mixed=True),
    ),
    (
        "openai-api-key",
        _token(
            rf"sk-(?<![{_B64}]sk-)(?!ant-)(?:(?:proj|svcacct|admin)-)?(?P<body>[{_B64}]{{32,}})",
            mixed=True,
        ),
    ),
    ("github-token", _token(r"gh[pousr]_(?<![\w]gh._)(?P<body>[A-Za-z0-9]{36,251})(?![\w])")),
    ("github-token", _token(r"github_pat_(?<![\w]github_pat_)(?P<body>\w{50,240})(?![\w])")),
    (
        "aws-access-key",
        _token(
            r"A[KS]IA(?<![A-Za-z0-9+/]A[KS]IA)(?P<body>[A-Z0-9]{16})(?![A-Za-z0-9+/])",
            min_distinct=5,
        ),
    ),
    (
        "aws-secret-key",
        _token(
            r"(?i:secret[_-]?access[_-]?key)[\"']?[ \t]{0,10}[:=]>?[ \t]{0,10}[\"']?"
            r"(?P<body>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
            min_distinct=8,
            body_only=True,
        ),
    ),
    (
        "slack-webhook",
        _token(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<body>[\w/+-]{20,})"),
    ),
    (
        "slack-token",
        _token(rf"xox[abprs]-(?<![{_B64}]xox.-)(?P<body>[A-Za-z0-9-]{{20,}})", digit=True),
    ),
    ("stripe-key", _token(r"[rs]k_(?:live|test)_(?<![\w][rs]k_...._)(?P<body>[A-Za-z0-9]{20,})")),
    ("google-api-key", _token(rf"AIza(?<![{_B64}]AIza)(?P<body>[{_B64}]{{35}})(?![{_B64}])")),
    ("npm-token", _token(r"npm_(?<![\w]npm_)(?P<body>[A-Za-z0-9]{36})(?![\w])")),
    (
        "jwt",
        _regex(
            rf"eyJ(?<![{_B64}]eyJ)[{_B64}]{{10,}}\.eyJ[{_B64}]{{10,}}\.[{_B64}]{{10,}}"
            rf"(?:\.[{_B64}]+){{0,2}}",
            lambda m: m.span(),
        ),
    ),
    (
        "bearer-token",
        _token(
            rf"(?i:bearer)(?<![{_B64}]......)[ \t]{{1,10}}(?P<body>[\w.~+/-]{{16,4096}}=*)",
            min_distinct=8,
            digit=True,
            body_only=True,
        ),
    ),
    (
        "basic-auth",
        _token(
            r"(?i:authorization)[\"']?[ \t]{0,10}[:=][ \t]{0,10}[\"']?"
            r"(?i:basic)[ \t]{1,10}(?P<body>[A-Za-z0-9+/]{8,4096}={0,2})",
            min_distinct=4,
            body_only=True,
        ),
    ),
    (
        "connection-string-password",
        _regex(
            r"://(?<=[A-Za-z0-9]://)[^\s:/@?#'\"]{0,128}:(?P<pw>[^\s@/?#'\"]{1,256})@",
            _password_in_url,
        ),
    ),
)

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?)-----")


def _private_keys(text: str) -> Iterator[_Span]:
    # The whole block goes; one without its END line (cut off by a truncation) is
    # redacted to the end of the text.
    pos = 0
    while (m := _PEM_BEGIN.search(text, pos)) is not None:
        end_line = f"-----END {m.group(1)}-----"
        end = text.find(end_line, m.end())
        if end < 0:
            yield m.start(), len(text)
            return
        pos = end + len(end_line)
        yield m.start(), pos


_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", re.ASCII)
_SECRET_LAST = frozenset(
    {"password", "passwd", "pwd", "pass", "passphrase", "secret", "token"}
    | {"apikey", "secretkey", "accesskey", "privatekey", "authkey"}
)
_KEY_QUALIFIERS = frozenset(
    {"api", "secret", "access", "private", "auth", "encryption", "signing", "master"}
    | {"client", "app", "session", "webhook", "service", "license", "admin", "subscription"}
)


def _is_secret_name(name: str) -> bool:
    # The secret word must be the name's last part: `DB_PASSWORD`, `apiKey`, `x-auth-token`
    # are secrets; `PASSWORD_MIN_LENGTH`, `TOKEN_TYPE`, `max_tokens`, `primary_key` are not.
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    if not parts:
        return False
    if parts[-1] in _SECRET_LAST:
        return True
    return parts[-1] == "key" and len(parts) > 1 and parts[-2] in _KEY_QUALIFIERS


# `name = value` where the name's last part is a secret word. The text is searched
# reversed: there every candidate starts with its separator (`=`, `:`, `>`), which the
# engine finds fast, and the name runs forward from the secret word.
_SECRET_WORDS = ("passphrase", "password", "passwd", "pass", "pwd", "secret", "token")
_ASSIGNMENT_REVERSED = re.compile(
    r"[=:>](?:(?<==)(?<!==):?|(?<=>)=|(?<=:)(?<![:/\\]:))[ \t]{0,10}\??[ \t]{0,10}[\"']?"
    rf"(?P<name>(?:{'|'.join(w[::-1] for w in _SECRET_WORDS)}"
    rf"|yek[_.-]?(?:{'|'.join(q[::-1] for q in sorted(_KEY_QUALIFIERS))}))[\w.-]{{0,60}})"
    r"(?![\w./-])",  # a longer name, or a URL's user part (`//user:pw@`), is no name
    re.IGNORECASE | re.ASCII,
)
# A quoted value, or a bare one that never starts with an opening bracket (a structure)
# or `#` (a comment) and stops at whitespace, quotes and `&` (a shell cannot hold a bare
# `&`; in a URL query it starts the next parameter). A bare value is judged on its first
# 256 characters; an accepted one is then redacted to its end.
_VALUE = re.compile(
    r"[ \t]{0,10}(?:\"((?:[^\"\\\n]|\\.)*)\"|'((?:[^'\\\n]|\\.)*)'"
    r"|([^\s'\"`{\[(<&#][^\s'\"`&]{0,255}))",
    re.ASCII,
)
_BARE_REST = re.compile(r"[^\s'\"`&]*", re.ASCII)


def _assignments(text: str) -> Iterator[_Span]:
    size = len(text)
    # Found last first, as (where the value starts, the name's span in the reversed text).
    found = [(size - m.start(), m.span("name")) for m in _ASSIGNMENT_REVERSED.finditer(text[::-1])]
    covered = 0  # a candidate inside an accepted value is part of that value
    for value_at, (rev_start, rev_end) in reversed(found):
        if value_at < covered or not _is_secret_name(text[size - rev_end : size - rev_start]):
            continue
        value = _VALUE.match(text, value_at)
        if value is None:
            continue
        bare = value.group(3) is not None
        group = 3 if bare else 1 if value.group(1) is not None else 2
        start, raw = value.start(group), value.group(group)
        if bare:  # trailing punctuation of a bare value belongs to the code around it
            raw = raw.rstrip(",;)]}>")
        if not raw or _is_placeholder(raw, bare=bare):
            continue
        end = start + len(raw)
        if bare and value.end() - start == 256:
            rest = _BARE_REST.match(text, value.end())
            end = start + len(text[start : rest.end() if rest else end].rstrip(",;)]}>"))
        covered = end
        yield start, end


_FINDERS: tuple[tuple[str, _Finder], ...] = (
    ("private-key", _private_keys),
    *_TOKEN_FINDERS,
    ("password-assignment", _assignments),
)
SECRET_KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _ in _FINDERS))
"""Every kind a marker can name, most specific first (that order breaks ties)."""
_PRIORITY = {kind: rank for rank, kind in enumerate(SECRET_KINDS)}
# A replacement can expose a neighbour (a look-around that saw a secret's first character
# now sees the marker's `[`), so redaction repeats until nothing is found; more than two
# passes never happens in practice, the cap only bounds the work.
_MAX_PASSES = 4


def find_secrets(text: str) -> list[SecretMatch]:
    """Secrets in the text, in order and disjoint (overlaps merge; the first, longest wins)."""
    found = [
        (start, -end, _PRIORITY[kind], kind)
        for kind, finder in _FINDERS
        for start, end in finder(text)
    ]
    found.sort()
    merged: list[SecretMatch] = []
    for start, neg_end, _, kind in found:
        if merged and start < merged[-1].end:
            if -neg_end > merged[-1].end:
                merged[-1] = SecretMatch(merged[-1].kind, merged[-1].start, -neg_end)
            continue
        merged.append(SecretMatch(kind, start, -neg_end))
    return merged


def redact_secrets(text: str) -> str:
    """Replace every secret with `[REDACTED:<kind>]`; the text around it is kept."""
    for _ in range(_MAX_PASSES):
        matches = find_secrets(text)
        if not matches:
            break
        pieces: list[str] = []
        pos = 0
        for match in matches:
            pieces += (text[pos : match.start], _marker(match.kind))
            pos = match.end
        pieces.append(text[pos:])
        text = "".join(pieces)
    return text


def redact_value(value: object) -> object:
    """Return a copy of a JSON value with secrets redacted in every string, keys included.

    A string or number under a secret-looking key (`password`, `apiKey`, …) is replaced
    whole unless it is obviously not a secret (empty, a reference, a placeholder).
    """
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return dict(_redact_member(k, v) for k, v in value.items())
    return value


def _redact_member(key: object, value: object) -> tuple[object, object]:
    if not isinstance(key, str):
        return key, redact_value(value)
    key = redact_secrets(key)
    # Judge the redacted key without its markers, so a second pass judges it the same.
    if not _is_secret_name(_MARKER.sub(" ", key)):
        return key, redact_value(value)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return key, redact_value(value)
    text = str(value)
    if _is_placeholder(text, bare=False):
        return key, value
    matches = find_secrets(text)
    whole = len(matches) == 1 and (matches[0].start, matches[0].end) == (0, len(text))
    return key, _marker(matches[0].kind if whole else "password-assignment")


_MARKER = re.compile(r"\[REDACTED:[a-z-]+\]")


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


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


def _is_placeholder(value: str, *, bare: bool) -> bool:
    # Obviously not a secret: empty, a reference, a template, a mask, a type, a count.
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
    return head.split(".")[0].lower() in _CODE_OBJECTS or _is_secret_name(last)
