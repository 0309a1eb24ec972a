"""Secrets assigned to a secret-looking name: `PASSWORD=…`, `apiKey: "…"`, `token => '…'`."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.redaction.names import SECRET_WORDS, is_secret_name
from pipeline.redaction.placeholders import is_placeholder

# `name = value` where the name's last part is a secret word. The text is searched
# reversed: there every candidate starts with its separator (`=`, `:`, `>`), which the
# engine finds fast, and the name runs forward from the secret word.
# Between the name and its separator may stand a subscript's `]` (`environ['API_KEY'] = …`)
# and a backslash before the closing quote (`\"password\": …`, JSON inside a JSON string).
_NAME_REVERSED = (
    r"[ \t]{0,10}\??[ \t]{0,10}\]?[\"']?\\?"
    r"(?P<name>(?:[0-9]{1,3}[_-]?)?"  # a numbered name: `API_KEY_2`
    rf"(?:{'|'.join(w[::-1] for w in SECRET_WORDS)}|yek[_.-]?[A-Za-z]{{2}})[\w.-]{{0,60}})"
    r"(?![\w./-])"  # a longer name, or a URL's user part (`//user:pw@`), is no name
)
_ASSIGNMENT_REVERSED = re.compile(
    r"[=:>](?:(?<==)(?<!==):?|(?<=>)="
    r"|(?<=:)(?<![:/]:)(?<![^\"]\\:))"  # not `::`, `://` or `:\`, but `:\"` (escaped JSON)
    + _NAME_REVERSED,
    re.IGNORECASE | re.ASCII,
)
# The same with a type annotation between the name and `=`: `api_key: str | None = …`. A
# scan of its own, so a value such as `token: dGVzdA1=` is still found by the one above.
_TYPE = r"[\w.\[\]]{1,40}"
_ANNOTATED_REVERSED = re.compile(
    rf"=(?<!==)[ \t]{{0,10}}{_TYPE}(?:[ \t]{{0,3}}[|,][ \t]{{0,3}}{_TYPE}){{0,3}}[ \t]{{0,10}}:"
    + _NAME_REVERSED,
    re.IGNORECASE | re.ASCII,
)
# What must follow a name's last word for the scan above to match (its forward reading,
# look-arounds left out); each has a literal prefix, so a search skips ahead fast.
_FOLLOWS_WORD = r"(?:[_-]?[0-9]{1,3})?\\?[\"']?\]?[ \t]{0,10}\??[ \t]{0,10}[=:>]"
ASSIGNMENT_ANCHORS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(word + _FOLLOWS_WORD)
    for word in ("pass(?:phrase|word|wd)?", "pwd", "secret", "token", "key", "auth", "key-data")
)
"""In lower-cased text, one of these occurs wherever an assignment does."""

# A quoted value, a braced word (`{Kx8!mQ2#pL}`; `{name}` is a placeholder), or a bare
# one that never starts with an opening bracket (a structure)
# or `#` (a comment) and stops at whitespace, quotes and an `&` that starts the next
# parameter of a URL query (`&next=1`); another `&` is part of it (`p@ss&word123`). A
# bare value is judged on its first 256 characters; an accepted one is then redacted to
# its end.
_BARE_CHAR = r"(?:[^\s'\"`&]|&(?![\w.-]{1,64}=))"
# Python's string prefixes (`b'…'`, `r"…"`, `rb'…'`, `f"…"`) belong to the quote.
_PREFIX = r"(?:[rRbBuUfF]{1,2}(?=[\"']))?"
# A JSON string inside a JSON string: `\"…\"`, where `\\` is a backslash of the inner text.
_ESCAPED = r"\\\"(?P<eq>(?:[^\"\\\n]|\\[^\"\\\n]|\\\\(?:[^\"\\\n]|\\[^\n]))*)\\\""
_QUOTED = (
    rf"{_PREFIX}(?:\"\"\"(?P<tdq>(?:[^\"\\]|\\.|\"(?!\"\"))*)\"\"\""
    r"|'''(?P<tsq>(?:[^'\\]|\\.|'(?!''))*)'''"
    r"|\"(?P<dq>(?:[^\"\\\n]|\\.)*)\"|'(?P<sq>(?:[^'\\\n]|\\.)*)')"
)
_VALUE = re.compile(
    rf"[ \t]{{0,10}}(?:{_QUOTED}|{_ESCAPED}"
    rf"|(?P<bare>\{{[^\s{{}}'\"`]{{1,254}}\}}(?![^\s,;])|[^\s'\"`{{\[(<&#]{_BARE_CHAR}{{0,255}}))",
    re.ASCII,
)
_BARE_REST = re.compile(f"{_BARE_CHAR}*", re.ASCII)
_TRAILING = ",;)]}>\\"  # after a bare value: the code's punctuation, an escaped quote's `\`
# A default given to a field declared with a secret name: `api_key: str = Field(default="…")`,
# `password = field(default='…')`, `token: SecretStr = SecretStr("…")`.
_DEFAULT_IN_CALL = re.compile(
    r"(?:[A-Za-z_][\w.]{0,40}\.)?(?:Field|field|attrib|ib|SecretStr|SecretBytes|Secret)\("
    r"(?:(?:\s|(?<=\n)[+-]){0,40}|[^()]{0,300}?\bdefault[ \t]*=[ \t]*)"  # `\n+` in a patch
    r"[rRbBuUfF]{0,2}(?:\"(?P<dq>(?:[^\"\\\n]|\\.)*)\"|'(?P<sq>(?:[^'\\\n]|\\.)*)')",
    re.ASCII,
)
# nsswitch.conf's `passwd: files systemd` names the sources of the user database.
_NSS_SOURCES = frozenset(
    {"files", "systemd", "sss", "ldap", "nis", "nisplus", "compat", "db", "dns", "winbind"}
    | {"mymachines", "myhostname", "resolve", "hesiod", "extrausers", "altfiles", "cache"}
)
# An AWS Secrets Manager ARN ends `…:secret:<name>`: a name, not an assignment.
_ARN_HEAD = re.compile(r"arn:aws[\w-]*:secretsmanager:[\w-]*:[0-9]*:\Z", re.ASCII)


def find_assignments(text: str) -> Iterator[tuple[int, int]]:
    """The spans of the values assigned to secret names, in order."""
    size = len(text)
    # As (where the value starts, the name's span in the reversed text), in order.
    backwards = text[::-1]
    found = sorted(
        (size - m.start(), m.span("name"))
        for scan in (_ASSIGNMENT_REVERSED, _ANNOTATED_REVERSED)
        for m in scan.finditer(backwards)
    )
    covered = 0  # a candidate inside an accepted value is part of that value
    for value_at, (rev_start, rev_end) in found:
        name_at = size - rev_end
        name = text[name_at : size - rev_start]
        if value_at < covered or not is_secret_name(name) or _is_arn(text, name_at):
            continue
        value = _VALUE.match(text, value_at)
        if value is None:
            items = list(_list_items(text, value_at))
            if items:
                covered = items[-1][1]
                yield from items
            continue
        group = value.lastgroup or "bare"  # the one alternative that matched
        bare = group == "bare"
        start, raw = value.start(group), value.group(group)
        if bare and not raw.startswith("{"):  # trailing punctuation belongs to the code
            raw = raw.rstrip(_TRAILING)
        if bare and "(" in raw and (default := _DEFAULT_IN_CALL.match(text, start)) is not None:
            group = "dq" if default.group("dq") is not None else "sq"
            start, raw, bare = default.start(group), default.group(group), False
        if not raw or is_placeholder(raw, bare=bare):
            continue
        if bare and name.lower() == "passwd" and raw in _NSS_SOURCES:
            continue
        end = start + len(raw)
        if bare and value.end() - start == 256:
            rest = _BARE_REST.match(text, value.end())
            end = start + len(text[start : rest.end() if rest else end].rstrip(_TRAILING))
        covered = end
        yield start, end


def _is_arn(text: str, name_at: int) -> bool:
    """Whether the name is the `secret` of a Secrets Manager ARN (`…:secret:prod/db-AbCdEf`)."""
    return text[name_at - 1 : name_at] == ":" and bool(
        _ARN_HEAD.search(text, max(0, name_at - 100), name_at)
    )


# A JSON or YAML flow list of quoted strings under a secret name: `"password": ["…"]`.
_LIST = re.compile(
    r"[ \t]{0,10}\[[ \t]{0,10}(?:\"(?:[^\"\\\n]|\\.)*\"[ \t]{0,10},?[ \t]{0,10}){1,64}\]"
)
_LIST_ITEM = re.compile(r"\"((?:[^\"\\\n]|\\.)*)\"")


def _list_items(text: str, at: int) -> Iterator[tuple[int, int]]:
    found = _LIST.match(text, at)
    if found is None:
        return
    for item in _LIST_ITEM.finditer(text, found.start(), found.end()):
        if item.group(1) and not is_placeholder(item.group(1), bare=False):
            yield item.span(1)
