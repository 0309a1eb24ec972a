"""The table of secret kinds: how each is found, and the anchors it cannot occur without.

A full scan for a kind runs only when one of its anchors occurs in the lower-cased text.
Every anchor has a literal prefix, so the regex engine skips through text without one
fast, while several full patterns (case-insensitive labels, `[rs]k_`) have none and try a
match at almost every character. An anchor must occur wherever its pattern matches
(tests/pipeline/test_secret_patterns.py holds every kind to that), so skipping a scan
never lets a secret through. Anchors are written in lower case and searched in the
lower-cased text, so one search serves the patterns that ignore case; a case-sensitive
pattern's anchor is its literal prefix lower-cased, which can only find more.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import msgspec

from pipeline.redaction.assignments import ASSIGNMENT_ANCHORS, find_assignments
from pipeline.redaction.placeholders import is_placeholder

Span = tuple[int, int]
Finder = Callable[[str], Iterator[Span]]
_Check = Callable[[re.Match[str]], Span | None]


class SecretPattern(msgspec.Struct, frozen=True):
    """One kind of secret: its full scan, and the anchors one of which is in every match.

    Anchors are lower-case and searched in the lower-cased text (`text.lower()`).
    """

    kind: str
    find: Finder
    anchors: tuple[re.Pattern[str], ...]

    def may_occur_in(self, folded_text: str) -> bool:
        """False only when the text (given lower-cased) certainly holds no such secret."""
        # A loop, not any() over a generator, which makes redacting 2 KB ~20 % slower.
        for anchor in self.anchors:  # noqa: SIM110
            if anchor.search(folded_text) is not None:
                return True
        return False


def _regex(pattern: str, check: _Check) -> Finder:
    compiled = re.compile(pattern, re.ASCII)

    def find(text: str) -> Iterator[Span]:
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
) -> Finder:
    # Few distinct characters make a mask (`ghp_xxxx…`); `mixed` asks for upper case,
    # lower case and a digit (a weak prefix such as `sk-` needs that evidence). The whole
    # token goes, prefix included, unless only the body follows a label (`Bearer …`).
    def check(m: re.Match[str]) -> Span | None:
        body = m.group("body")
        if len(set(body)) < min_distinct:
            return None
        if (mixed or digit) and not any(c.isdigit() for c in body):
            return None
        if mixed and (body.lower() == body or body.upper() == body):
            return None
        return m.span("body") if body_only else m.span()

    return _regex(pattern, check)


def _pattern(kind: str, find: Finder, *anchors: str) -> SecretPattern:
    return SecretPattern(kind, find, tuple(re.compile(a) for a in anchors))


def _password_in_url(m: re.Match[str]) -> Span | None:
    return None if is_placeholder(m.group("pw"), bare=False) else m.span("pw")


_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?)-----")


def _private_keys(text: str) -> Iterator[Span]:
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


_B64 = "A-Za-z0-9_-"  # base64url, the alphabet of most token bodies
# A pattern starts with its literal prefix (the engine then skips ahead fast) and checks
# the character before it with a look-behind that excludes the body's alphabet: inside a
# run of token characters a match is tried once, so every scan stays linear.
SECRET_PATTERNS: tuple[SecretPattern, ...] = (
    _pattern("private-key", _private_keys, "-----begin "),
    _pattern(
        "anthropic-api-key",
        _token(rf"sk-ant-(?<![{_B64}]sk-ant-)(?P<body>[{_B64}]{{32,}})", mixed=True),
        "sk-ant-",
    ),
    _pattern(
        "openai-api-key",
        _token(
            rf"sk-(?<![{_B64}]sk-)(?!ant-)(?:(?:proj|svcacct|admin)-)?(?P<body>[{_B64}]{{32,}})",
            mixed=True,
        ),
        "sk-",
    ),
    _pattern(
        "github-token",
        _token(r"gh[pousr]_(?<![\w]gh._)(?P<body>[A-Za-z0-9]{36,251})(?![\w])"),
        "gh[pousr]_",
    ),
    _pattern(
        "github-token",
        _token(r"github_pat_(?<![\w]github_pat_)(?P<body>\w{50,240})(?![\w])"),
        "github_pat_",
    ),
    _pattern(
        "aws-access-key",
        _token(
            r"A[KS]IA(?<![A-Za-z0-9+/]A[KS]IA)(?P<body>[A-Z0-9]{16})(?![A-Za-z0-9+/])",
            min_distinct=5,
        ),
        "a[ks]ia",
    ),
    _pattern(
        "aws-secret-key",
        _token(
            r"(?i:secret[_-]?access[_-]?key)[\"']?[ \t]{0,10}[:=]>?[ \t]{0,10}[\"']?"
            r"(?P<body>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
            min_distinct=8,
            body_only=True,
        ),
        r"secret[_-]?access[_-]?key[\"']?[ \t]{0,10}[:=]",
    ),
    _pattern(
        "slack-webhook",
        _token(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<body>[\w/+-]{20,})"),
        r"https://hooks\.slack\.com/",
    ),
    _pattern(
        "slack-token",
        _token(rf"xox[abprs]-(?<![{_B64}]xox.-)(?P<body>[A-Za-z0-9-]{{20,}})", digit=True),
        "xox[abprs]-",
    ),
    _pattern(
        "stripe-key",
        _token(r"[rs]k_(?:live|test)_(?<![\w][rs]k_...._)(?P<body>[A-Za-z0-9]{20,})"),
        "k_(?:live|test)_",
    ),
    _pattern(
        "google-api-key",
        _token(rf"AIza(?<![{_B64}]AIza)(?P<body>[{_B64}]{{35}})(?![{_B64}])"),
        "aiza",
    ),
    _pattern("npm-token", _token(r"npm_(?<![\w]npm_)(?P<body>[A-Za-z0-9]{36})(?![\w])"), "npm_"),
    _pattern(
        "jwt",
        _regex(
            rf"eyJ(?<![{_B64}]eyJ)[{_B64}]{{10,}}\.eyJ[{_B64}]{{10,}}\.[{_B64}]{{10,}}"
            rf"(?:\.[{_B64}]+){{0,2}}",
            lambda m: m.span(),
        ),
        "eyj",
    ),
    _pattern(
        "bearer-token",
        _token(
            rf"(?i:bearer)(?<![{_B64}]......)[ \t]{{1,10}}(?P<body>[\w.~+/-]{{16,4096}}=*)",
            min_distinct=8,
            digit=True,
            body_only=True,
        ),
        "bearer[ \t]",
    ),
    _pattern(
        "basic-auth",
        _token(
            r"(?i:authorization)[\"']?[ \t]{0,10}[:=][ \t]{0,10}[\"']?"
            r"(?i:basic)[ \t]{1,10}(?P<body>[A-Za-z0-9+/]{8,4096}={0,2})",
            min_distinct=4,
            body_only=True,
        ),
        r"authorization[\"']?[ \t]{0,10}[:=][ \t]{0,10}[\"']?basic[ \t]",
    ),
    _pattern(
        "connection-string-password",
        _regex(
            r"://(?<=[A-Za-z0-9]://)[^\s:/@?#'\"]{0,128}:(?P<pw>[^\s@/?#'\"]{1,256})@",
            _password_in_url,
        ),
        "://",
    ),
    SecretPattern("password-assignment", find_assignments, ASSIGNMENT_ANCHORS),
)
"""Every kind of secret, most specific first (that order breaks ties between overlaps)."""

SECRET_KINDS: tuple[str, ...] = tuple(dict.fromkeys(p.kind for p in SECRET_PATTERNS))
"""Every kind a marker can name, most specific first (that order breaks ties)."""
