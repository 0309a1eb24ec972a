"""Secrets recognised by where they stand: command-line flags, headers, cookies, config files.

`--password X`, `mysql -pX`, `curl -u user:pw`, `docker login -p X`, `vault login X`,
`redis-cli -a X`, `sqlcmd -P X`, `openssl … -k X` / `-pass pass:X`, `htpasswd -b … user X`,
`.netrc`'s `password X`, `Authorization: Token X`, cookies, Azure connection strings and
SAS signatures, a token as a URL's user (`https://<key>@sentry.io`).
"""

from __future__ import annotations

import re

from pipeline.redaction.finders import (
    SecretPattern,
    Span,
    labelled,
    pattern,
    regex,
    token,
)
from pipeline.redaction.placeholders import is_placeholder

_VALUE = r"['\"]?(?P<body>[^\s'\"-][^\s'\"]{0,511})"  # a flag's value, quoted or not
_LONG_FLAG_WORDS = (
    r"password|passwd|pass|token|secret|api-?key|access-?key|account-?key|secret-?key"
    r"|auth|client-secret"
)
# A command then, on the same command line, its short password flag.
_COMMAND = r"(?:[^\n|;&]{0,200}?[ \t])"


def _user_password(m: re.Match[str]) -> Span | None:
    # `docker run -u 1000:1000` is a uid and a gid, not a user and a password.
    user, password = m.group("user"), m.group("body")
    if (user.isdigit() and password.isdigit()) or is_placeholder(password, bare=False):
        return None
    return m.span("body")


# `htpasswd -b[c…] FILE USER PASSWORD`, `htpasswd -nb USER PASSWORD`: the last argument.
_ARG = r"(?:[^\s'\"|;&<>-][^\s'\"|;&<>]{0,255}|'[^'\n]{1,256}'|\"[^\"\n]{1,256}\")"
_HTPASSWD = (
    r"htpasswd(?P<flags>(?:[ \t]+-[A-Za-z]{1,8}(?:[ \t]+[0-9]{1,2}(?![^\s]))?){1,6})"
    rf"(?P<args>(?:[ \t]+{_ARG}){{2,3}})"
)
_ONE_ARG = re.compile(_ARG)


def _htpasswd_password(m: re.Match[str]) -> Span | None:
    flags = m.group("flags")
    if "b" not in flags:  # without -b the password is asked for, not given
        return None
    args = list(_ONE_ARG.finditer(m.group("args")))
    if len(args) != (2 if "n" in flags else 3):
        return None
    start, end = args[-1].span()
    if args[-1].group().startswith(("'", '"')):
        start, end = start + 1, end - 1
    offset = m.start("args")
    if is_placeholder(m.string[offset + start : offset + end], bare=False):
        return None
    return offset + start, offset + end


CLI_PATTERNS: tuple[SecretPattern, ...] = (
    pattern(
        "cli-password",
        labelled(
            rf"--(?<![\w-]--)(?:[a-z0-9]{{1,20}}-){{0,4}}(?:{_LONG_FLAG_WORDS})"
            rf"(?:[ \t]+|=){_VALUE}",
            min_chars=4,
        ),
        *(rf"{w}(?:[ \t]|=)" for w in ("pass(?:word|wd)?", "token", "secret", "key", "auth")),
    ),
    pattern(
        "cli-password",
        labelled(
            rf"(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b{_COMMAND}-p{_VALUE}",
            min_chars=3,
        ),
        "mysql",
        "mariadb",
    ),
    pattern(
        "cli-password",
        labelled(rf"(?:login|upload|publish|sshpass)\b{_COMMAND}-p[ \t]+{_VALUE}", min_chars=3),
        "login",
        "upload",
        "publish",
        "sshpass",
    ),
    pattern("cli-password", labelled(rf"auth[ \t]+init\b{_COMMAND}-t[ \t]+{_VALUE}"), "auth"),
    pattern(
        "cli-password",
        labelled(r"vault[ \t]+login[ \t]+(?P<body>[^\s'\"=-][^\s'\"=]{7,511})(?![^\s'\"])"),
        "vault",
    ),
    pattern(
        "cli-password",
        regex(
            r"(?<![\w-])(?:-u|-U|--user|--proxy-user)(?:[ \t]*|=)['\"]?"
            r"(?P<user>[^\s:'\"-][^\s:'\"]{0,127}):(?P<body>[^\s'\"]{1,256})",
            _user_password,
        ),
        "-u",  # also in `--user` and `--proxy-user`
    ),
    pattern(
        "cli-password",
        labelled(rf"redis-cli\b{_COMMAND}-a[ \t]+{_VALUE}", min_chars=3),
        "redis-cli",
    ),
    pattern(
        "cli-password",
        labelled(rf"(?:sqlcmd|bcp)\b{_COMMAND}-P[ \t]*{_VALUE}", min_chars=3),
        "sqlcmd",
        "bcp",
    ),
    pattern(
        "cli-password",
        labelled(rf"openssl\b{_COMMAND}-[kK][ \t]+{_VALUE}", min_chars=3),
        "openssl",
    ),
    pattern(
        "cli-password",  # openssl's `-pass pass:X`, `-passin pass:X`, `-passout pass:X`
        labelled(r"(?<![\w-])-pass(?:in|out)?[ \t]+['\"]?pass:(?P<body>[^\s'\"-][^\s'\"]{0,511})"),
        "pass:",
    ),
    pattern("cli-password", regex(_HTPASSWD, _htpasswd_password), "htpasswd"),
    pattern(
        "netrc-password",
        labelled(
            r"\b(?:login|machine)[ \t]+\S{1,200}(?:[ \t\r]|\n[+-]?){1,40}password[ \t]+"
            r"(?P<body>\S{1,512})"  # a patch's lines start with ' ', '-' or '+'
        ),
        r"password[ \t]",
    ),
)
"""Secrets given on a command line, or in `.netrc`."""

HEADER_PATTERNS: tuple[SecretPattern, ...] = (
    pattern(
        "authorization-header",
        token(
            r"(?i:authorization)[\"']?\]?[ \t]{0,10}[:=][ \t]{0,10}[\"']?(?!(?i:basic|bearer)[ \t])"
            r"(?:[A-Za-z-]{1,20}[ \t]{1,10})?(?P<body>[^\s'\"]{8,4096})",
            digit=True,
            body_only=True,
        ),
        r"authorization[\"']?\]?[ \t]{0,10}[:=]",  # also `headers["Authorization"] = …`
    ),
    pattern(
        "cookie",
        labelled(
            r"(?i:cookie)[\"']?[ \t]{0,10}[:=][ \t]{0,10}[\"']?"
            r"(?P<body>[^\n'\"=;]{1,128}=[^\n'\"]{1,4096})"
        ),
        r"cookie[\"']?[ \t]{0,10}[:=]",
    ),
    pattern(
        "cookie",
        labelled(
            r"(?<![\w-])(?:-b|--cookie)[ \t]+['\"]?(?P<body>[^\s'\"=;]{1,128}=[^\s'\"]{1,4096})"
        ),
        "-b[ \t]",
        "--cookie[ \t]",
    ),
    pattern(
        "cookie",
        token(
            r"(?<![\w.-])(?i:sessionid|sessid|phpsessid|jsessionid|connect\.sid)="
            r"(?P<body>[A-Za-z0-9%._~+/:-]{16,4096}={0,2})",
            min_distinct=8,
            digit=True,
            body_only=True,
        ),
        "sessionid=",
        "sessid=",
        r"connect\.sid=",
    ),
    pattern(
        "azure-storage-key",
        token(
            r"(?i:accountkey|sharedaccesskey)=(?P<body>[A-Za-z0-9+/]{20,}={0,2})",
            min_distinct=10,
            body_only=True,
        ),
        "accountkey=",
        "sharedaccesskey=",
    ),
    pattern(
        "azure-sas-signature",
        token(r"sig=(?<=[?&;]sig=)(?P<body>[A-Za-z0-9%+/=]{20,})", min_distinct=10, body_only=True),
        "sig=",
    ),
    pattern(
        "url-token",
        token(
            r"://(?<=[A-Za-z0-9]://)(?P<body>[A-Za-z0-9_.~-]{20,256})@",
            min_distinct=8,
            digit=True,
            body_only=True,
        ),
        "://",
    ),
)
"""Secrets in HTTP headers, cookies, Azure connection strings and URLs."""
