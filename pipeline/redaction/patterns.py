"""The table of secret kinds: how each is found, and the anchors it cannot occur without.

The rows live by family (pipeline.redaction.vendors, .shapes, .cloud, .config_files,
.kubernetes); this module holds the rest (private keys, URL passwords, assignments) and
the order of the table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.redaction.assignments import ASSIGNMENT_ANCHORS, find_assignments
from pipeline.redaction.cloud import CLOUD_PATTERNS
from pipeline.redaction.config_files import CONFIG_FILE_PATTERNS
from pipeline.redaction.finders import SecretPattern, Span, pattern, regex, token
from pipeline.redaction.kubernetes import KUBERNETES_PATTERN
from pipeline.redaction.placeholders import is_placeholder
from pipeline.redaction.shapes import CLI_PATTERNS, HEADER_PATTERNS
from pipeline.redaction.vendors import VENDOR_PATTERNS

__all__ = ["SECRET_KINDS", "SECRET_PATTERNS", "SecretPattern"]

# A PEM private key: its BEGIN line, or an END line whose BEGIN was cut off.
_PEM_EDGE = re.compile(r"-----(BEGIN|END) ((?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?)-----")


def _private_keys(text: str) -> Iterator[Span]:
    # The whole block goes. One without its END line (cut off by a truncation) is redacted
    # to the end of the text; an END line without its BEGIN, from the start of the text.
    pos = 0
    while (m := _PEM_EDGE.search(text, pos)) is not None:
        if m.group(1) == "END":
            yield pos, m.end()
            pos = m.end()
            continue
        end_line = f"-----END {m.group(2)}-----"
        end = text.find(end_line, m.end())
        if end < 0:
            yield m.start(), len(text)
            return
        pos = end + len(end_line)
        yield m.start(), pos


# A URL's password runs to the last `@` of its run of non-blank characters, so one holding
# `#`, `/`, `?` or `@` goes whole (`postgresql://app:Xk9#mP2!@db/app`). A `//` ends the run
# (the next URL's scheme), which keeps a failed match short.
_URL_CHAR = r"(?:[^\s'\"@/]|/(?!/))"
_URL_CREDENTIALS = (
    r"://(?<=[A-Za-z0-9]://)(?P<user>[^\s:/@?#'\"\[\]]{0,128}):"
    rf"(?P<rest>{_URL_CHAR}{{1,300}}@(?:{_URL_CHAR}{{0,300}}@){{0,8}})"
)
# Digits then a path read as a port (`host:8080/path@v2`), so a password that starts with
# digits and a `/` is kept: the URL alone cannot tell them apart.
_PORT_THEN_PATH = re.compile(r"[0-9]{1,5}(?:[/?#].*)?", re.DOTALL)


def _password_in_url(m: re.Match[str]) -> Span | None:
    password = m.group("rest")[:-1]  # up to its last `@`
    if _PORT_THEN_PATH.fullmatch(password) or is_placeholder(password, bare=False):
        return None
    start = m.start("rest")
    return start, start + len(password)


_CONNECTION_STRING = pattern(
    "connection-string-password", regex(_URL_CREDENTIALS, _password_in_url), "://"
)

SECRET_PATTERNS: tuple[SecretPattern, ...] = (
    pattern("private-key", _private_keys, "-----begin ", "-----end "),
    *VENDOR_PATTERNS,
    pattern(
        "aws-secret-key",
        token(
            r"(?i:secret[_-]?access[_-]?key)[\"']?[ \t]{0,10}[:=]>?[ \t]{0,10}[\"']?"
            r"(?P<body>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
            min_distinct=8,
            body_only=True,
        ),
        r"secret[_-]?access[_-]?key[\"']?[ \t]{0,10}[:=]",
    ),
    pattern(
        "bearer-token",
        token(
            r"(?i:bearer)(?<![A-Za-z0-9_-]......)[ \t]{1,10}(?P<body>[\w.~+/-]{16,4096}=*)",
            min_distinct=8,
            digit=True,
            body_only=True,
        ),
        "bearer[ \t]",
    ),
    pattern(
        "basic-auth",
        token(
            r"(?i:authorization)[\"']?\]?[ \t]{0,10}[:=][ \t]{0,10}[\"']?"
            r"(?i:basic)[ \t]{1,10}(?P<body>[A-Za-z0-9+/]{8,4096}={0,2})",
            min_distinct=4,
            body_only=True,
        ),
        r"authorization[\"']?\]?[ \t]{0,10}[:=][ \t]{0,10}[\"']?basic[ \t]",
    ),
    *HEADER_PATTERNS,
    *CLI_PATTERNS,
    *CLOUD_PATTERNS,
    KUBERNETES_PATTERN,
    _CONNECTION_STRING,
    SecretPattern("password-assignment", find_assignments, ASSIGNMENT_ANCHORS),
    *CONFIG_FILE_PATTERNS,
)
"""Every kind of secret, most specific first (that order breaks ties between overlaps)."""

SECRET_KINDS: tuple[str, ...] = tuple(dict.fromkeys(p.kind for p in SECRET_PATTERNS))
"""Every kind a marker can name, most specific first (that order breaks ties)."""
