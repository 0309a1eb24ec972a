"""Secrets assigned to a secret-looking name: `PASSWORD=…`, `apiKey: "…"`, `token => '…'`."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.redaction.names import SECRET_WORDS, is_secret_name
from pipeline.redaction.placeholders import is_placeholder

# `name = value` where the name's last part is a secret word. The text is searched
# reversed: there every candidate starts with its separator (`=`, `:`, `>`), which the
# engine finds fast, and the name runs forward from the secret word.
_ASSIGNMENT_REVERSED = re.compile(
    r"[=:>](?:(?<==)(?<!==):?|(?<=>)=|(?<=:)(?<![:/\\]:))[ \t]{0,10}\??[ \t]{0,10}[\"']?"
    r"(?P<name>(?:[0-9]{1,3}[_-]?)?"  # a numbered name: `API_KEY_2`
    rf"(?:{'|'.join(w[::-1] for w in SECRET_WORDS)}|yek[_.-]?[A-Za-z]{{2}})[\w.-]{{0,60}})"
    r"(?![\w./-])",  # a longer name, or a URL's user part (`//user:pw@`), is no name
    re.IGNORECASE | re.ASCII,
)
# What must follow a name's last word for the scan above to match (its forward reading,
# look-arounds left out); each has a literal prefix, so a search skips ahead fast.
_FOLLOWS_WORD = r"(?:[_-]?[0-9]{1,3})?[\"']?[ \t]{0,10}\??[ \t]{0,10}[=:>]"
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
_VALUE = re.compile(
    r"[ \t]{0,10}(?:\"((?:[^\"\\\n]|\\.)*)\"|'((?:[^'\\\n]|\\.)*)'"
    rf"|(\{{[^\s{{}}'\"`]{{1,254}}\}}(?![^\s,;])|[^\s'\"`{{\[(<&#]{_BARE_CHAR}{{0,255}}))",
    re.ASCII,
)
_BARE_REST = re.compile(f"{_BARE_CHAR}*", re.ASCII)


def find_assignments(text: str) -> Iterator[tuple[int, int]]:
    """The spans of the values assigned to secret names, in order."""
    size = len(text)
    # Found last first, as (where the value starts, the name's span in the reversed text).
    found = [(size - m.start(), m.span("name")) for m in _ASSIGNMENT_REVERSED.finditer(text[::-1])]
    covered = 0  # a candidate inside an accepted value is part of that value
    for value_at, (rev_start, rev_end) in reversed(found):
        if value_at < covered or not is_secret_name(text[size - rev_end : size - rev_start]):
            continue
        value = _VALUE.match(text, value_at)
        if value is None:
            items = list(_list_items(text, value_at))
            if items:
                covered = items[-1][1]
                yield from items
            continue
        bare = value.group(3) is not None
        group = 3 if bare else 1 if value.group(1) is not None else 2
        start, raw = value.start(group), value.group(group)
        if bare and not raw.startswith("{"):  # trailing punctuation belongs to the code
            raw = raw.rstrip(",;)]}>")
        if not raw or is_placeholder(raw, bare=bare):
            continue
        end = start + len(raw)
        if bare and value.end() - start == 256:
            rest = _BARE_REST.match(text, value.end())
            end = start + len(text[start : rest.end() if rest else end].rstrip(",;)]}>"))
        covered = end
        yield start, end


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
