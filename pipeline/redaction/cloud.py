"""Secrets in what cloud tools print and take: AWS CLI, Secrets Manager, Terraform outputs.

`aws configure set aws_secret_access_key X`, a `get-secret-value` answer's `SecretString`
(plain or JSON inside the JSON string), `--secret-string X`, and every value that
`terraform output -json` marks `"sensitive": true`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.redaction.finders import SecretPattern, Span, labelled, pattern, regex
from pipeline.redaction.placeholders import is_placeholder

# A JSON string's content; a raw newline cannot be in one, so a failed match stops at it.
_JSON_STRING = r"(?:[^\"\\\n]|\\.)"
_SHORT = 64


def _whole(m: re.Match[str]) -> Span | None:
    # A long value goes even when part of it reads as a placeholder (`…` in a JSON secret).
    body = m.group("body")
    if len(body) < _SHORT and is_placeholder(body, bare=False):
        return None
    return m.span("body")


def _flag_value(m: re.Match[str]) -> Span | None:
    for group in ("sq", "dq", "bare"):
        if m.group(group) is not None:
            body = m.group(group)
            return None if is_placeholder(body, bare=False) else m.span(group)
    return None


_SENSITIVE = re.compile(r"\"sensitive\"[ \t]*:[ \t]*true\b")
_VALUE_KEY = re.compile(r"\"value\"\s{0,40}:\s{0,40}")
_SCALAR = re.compile(r"-?[0-9][0-9.eE+-]{0,63}|true|false")
_JSON_SPECIAL = re.compile(r"[\\\"\[\]{}]")
_WINDOW = 65_536  # an output's type and value, at most


def _sensitive_outputs(text: str) -> Iterator[Span]:
    # Terraform writes each output as {"sensitive": …, "type": …, "value": …}: the first
    # `"value"` after `"sensitive": true` is that output's. Each search stops at the next
    # output marked sensitive, so the scans never overlap and stay linear.
    marks = list(_SENSITIVE.finditer(text))
    for i, mark in enumerate(marks):
        limit = min(len(text), mark.end() + _WINDOW)
        if i + 1 < len(marks):
            limit = min(limit, marks[i + 1].start())
        key = _VALUE_KEY.search(text, mark.end(), limit)
        if key is None or key.end() >= limit:
            continue
        end = _json_value_end(text, key.end(), limit)
        start = key.end()
        if end is None:  # cut off: the rest of the window goes
            end = limit
        elif text[start] == '"':  # a string: its content, the quotes stay
            start, end = start + 1, end - 1
        value = text[start:end]
        if value and not (len(value) < _SHORT and is_placeholder(value, bare=False)):
            yield start, end


def _json_value_end(text: str, start: int, limit: int) -> int | None:
    """Where the JSON value at `start` ends; None when it does not end before `limit`."""
    if text[start] not in '"[{':
        scalar = _SCALAR.match(text, start, limit)
        return None if scalar is None else scalar.end()
    depth, in_string, escaped_at = 0, False, -1
    for m in _JSON_SPECIAL.finditer(text, start, limit):
        char, at = m.group(), m.start()
        if at == escaped_at:  # the character after a backslash inside a string
            continue
        if in_string:
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
                if depth == 0:
                    return at + 1
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return at + 1
    return None


CLOUD_PATTERNS: tuple[SecretPattern, ...] = (
    pattern(
        "aws-secret-key",
        labelled(
            r"configure[ \t]+set[ \t]+(?:[\w-]{1,64}\.){0,2}"
            r"(?i:aws_secret_access_key|aws_session_token|aws_security_token)"
            r"[ \t]+['\"]?(?P<body>[A-Za-z0-9/+=]{16,4096})",
        ),
        "configure",
    ),
    pattern(
        "secretsmanager-secret",
        regex(rf"\"Secret(?:String|Binary)\"[ \t]*:[ \t]*\"(?P<body>{_JSON_STRING}+)\"", _whole),
        '"secretstring"',
        '"secretbinary"',
    ),
    pattern(
        "secretsmanager-secret",
        regex(
            r"--secret-(?:string|binary)(?:[ \t]+|=)(?:'(?P<sq>[^'\n]{1,65536})'"
            rf"|\"(?P<dq>{_JSON_STRING}{{1,65536}})\"|(?P<bare>[^\s'\"-][^\s'\"]{{0,4095}}))",
            _flag_value,
        ),
        "--secret-string",
        "--secret-binary",
    ),
    pattern("terraform-sensitive-output", _sensitive_outputs, '"sensitive"'),
)
"""Secrets of AWS and Terraform, in the shapes their CLIs print and take."""
