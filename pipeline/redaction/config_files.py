"""Secrets in config files whose lines are no `name = value`: XML, PHP, .pgpass, Dockerfiles.

Maven's `<password>X</password>`, NuGet's and .NET's `<add key="ClearTextPassword"
value="X"/>`, PHP's `define('DB_PASSWORD', 'X')` (and WordPress's keys and salts),
`.pgpass` lines (`host:port:db:user:X`) and a Dockerfile's `ENV API_TOKEN X`.
"""

from __future__ import annotations

import re

from pipeline.redaction.finders import SecretPattern, Span, pattern, regex
from pipeline.redaction.names import is_secret_name
from pipeline.redaction.placeholders import is_placeholder

# WordPress's wp-config.php: eight keys and salts, all secrets.
_WORDPRESS = frozenset(
    f"{prefix}_{kind}"
    for prefix in ("AUTH", "SECURE_AUTH", "LOGGED_IN", "NONCE")
    for kind in ("KEY", "SALT")
)
_WORDPRESS_DEFAULT = "put your unique phrase here"
# A path is where a secret is kept, not the secret (Maven's `<privateKey>~/.ssh/id</…>`).
_PATH = re.compile(r"(?:~|\$\{[^{}]*\}|\.{1,2})?/[\w./-]*")


def _named_value(m: re.Match[str]) -> Span | None:
    """The `body` group when `name` is a secret's name and the body no placeholder."""
    name = m.group("name").rpartition(":")[2]  # `<ns:password>`
    for group in ("body", "sq", "dq"):
        if group in m.re.groupindex and m.group(group) is not None:
            break
    body = m.group(group).strip()
    if not body or is_placeholder(body, bare=False) or _PATH.fullmatch(body):
        return None
    if not (is_secret_name(name) or name.upper() in _WORDPRESS):
        return None
    if body == _WORDPRESS_DEFAULT:
        return None
    start = m.start(group) + len(m.group(group)) - len(m.group(group).lstrip())
    return start, start + len(body)


def _bare_value(m: re.Match[str]) -> Span | None:
    """A Dockerfile's `ENV NAME value`: the rest of the line, without quotes around it."""
    if not is_secret_name(m.group("name")):
        return None
    start, body = m.start("body"), m.group("body").rstrip()
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "'\"":
        start, body = start + 1, body[1:-1]
    if not body or is_placeholder(body, bare=False):
        return None
    return start, start + len(body)


def _pgpass_password(m: re.Match[str]) -> Span | None:
    body = m.group("body")
    return None if is_placeholder(body, bare=False) else m.span("body")


_QUOTED = r"(?:'(?P<sq>(?:[^'\\\n]|\\.){1,1024})'|\"(?P<dq>(?:[^\"\\\n]|\\.){1,1024})\")"

CONFIG_FILE_PATTERNS: tuple[SecretPattern, ...] = (
    pattern(
        "password-assignment",  # <password>X</password>, <ns:apiKey attr="…">X</ns:apiKey>
        regex(
            r"<(?P<name>[A-Za-z_][\w.:-]{0,63})(?:[ \t][^<>\n]{0,200})?>"
            r"(?P<body>[^<\n]{1,1024})</(?P=name)[ \t]*>",
            _named_value,
        ),
        # One anchor per word: each has a literal prefix, so a search skips ahead fast.
        *(
            rf"{word}[\w-]{{0,10}}[ \t]*>"
            for word in ("pass", "pwd", "secret", "token", "key", "auth")
        ),
    ),
    pattern(
        "password-assignment",  # <add key="ClearTextPassword" value="X" />
        regex(
            r"<add[ \t]+key[ \t]*=[ \t]*(?P<q>[\"'])(?P<name>[^\"'<>\n]{1,100})(?P=q)[ \t]+"
            r"value[ \t]*=[ \t]*(?:\"(?P<dq>[^\"<>\n]{1,1024})\"|'(?P<sq>[^'<>\n]{1,1024})')",
            _named_value,
        ),
        "<add",
    ),
    pattern(
        "password-assignment",  # define('DB_PASSWORD', 'X'); define( "AUTH_KEY", "X" );
        regex(
            r"define[ \t]*\([ \t]*(?P<q>[\"'])(?P<name>[A-Za-z_]\w{0,100})(?P=q)[ \t]*,[ \t]*"
            + _QUOTED,
            _named_value,
        ),
        "define",
    ),
    pattern(
        "password-assignment",  # ENV API_TOKEN value (the old form, without `=`)
        regex(
            r"(?m)(?:^[+-]?[ \t]*|#\(nop\)[ \t]+)(?i:env)[ \t]+(?P<name>[A-Za-z_]\w{0,100})"
            r"[ \t]+(?P<body>[^\s=][^\n]{0,1023})",
            _bare_value,
        ),
        r"env[ \t]",
    ),
    pattern(
        "pgpass-password",  # hostname:port:database:username:password
        regex(
            r"(?m)^[ +-]?(?:\*|[A-Za-z0-9_.-]{1,253}):(?:\*|[0-9]{1,5}):"
            r"(?:[^:\s\\]|\\.){1,63}:(?:[^:\s\\]|\\.){1,63}:"
            r"(?P<body>(?:[^:\s\\]|\\.){1,512})[ \t]*\r?$",
            _pgpass_password,
        ),
        r":(?:\*|[0-9]{1,5}):",
    ),
)
"""Secrets in XML, PHP, .pgpass and Dockerfile lines."""
