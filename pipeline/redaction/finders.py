"""The building blocks of the secret table: a kind, its full scan, and the anchors it needs.

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
from bisect import bisect_right
from collections.abc import Callable, Iterator

import msgspec

from pipeline.redaction.placeholders import is_placeholder

Span = tuple[int, int]
Finder = Callable[[str], Iterator[Span]]
Check = Callable[[re.Match[str]], Span | None]


class SecretPattern(msgspec.Struct, frozen=True):
    """One kind of secret: its full scan, and the anchors one of which is in every match.

    Anchors are lower-case and searched in the lower-cased text (`text.lower()`).
    """

    kind: str
    find: Finder
    anchors: tuple[re.Pattern[str], ...]
    literals: tuple[str, ...] = ()
    """The anchors that are plain strings: `in` finds them several times faster than a search."""
    searched: tuple[re.Pattern[str], ...] | None = None
    """The other anchors (all of them when None)."""

    def may_occur_in(self, folded_text: str) -> bool:
        """False only when the text (given lower-cased) certainly holds no such secret."""
        # Loops, not any() over a generator, which makes redacting 2 KB ~20 % slower.
        for literal in self.literals:
            if literal in folded_text:
                return True
        for anchor in self.anchors if self.searched is None else self.searched:
            if anchor.search(folded_text) is not None:
                return True
        return False


def regex(pattern: str, check: Check) -> Finder:
    """A finder yielding what `check` makes of each match of `pattern` (None skips it)."""
    # Compiled on first use: the hook is a short process, and most calls hold no anchor of
    # most kinds, so compiling every pattern at import would cost it more than the scans.
    compiled: list[re.Pattern[str]] = []

    def find(text: str) -> Iterator[Span]:
        if not compiled:
            compiled.append(re.compile(pattern, re.ASCII))
        search = compiled[0].search
        pos = 0
        while (m := search(text, pos)) is not None:
            span = check(m)
            pos = m.start() + 1 if span is None else max(m.end(), m.start() + 1)
            if span is not None:
                yield span

    return find


def token(
    pattern: str,
    *,
    min_distinct: int = 6,
    mixed: bool = False,
    digit: bool = False,
    cased: bool = False,
    body_only: bool = False,
) -> Finder:
    """A finder for a token whose `body` group must look random, not like a mask or a word."""

    # Few distinct characters make a mask (`ghp_xxxx…`); `mixed` asks for upper case,
    # lower case and a digit (a weak prefix such as `sk-` needs that evidence), `cased`
    # for both cases only. The whole token goes, prefix included, unless only the body
    # follows a label (`Bearer …`).
    def check(m: re.Match[str]) -> Span | None:
        body = m.group("body")
        if len(set(body)) < min_distinct:
            return None
        if (mixed or digit) and not any(c.isdigit() for c in body):
            return None
        if (mixed or cased) and (body.lower() == body or body.upper() == body):
            return None
        return m.span("body") if body_only else m.span()

    return regex(pattern, check)


# A metavariable in usage text: `--api-key API_KEY`, `-p [PASSWORD]`.
_METAVAR = re.compile(r"\[?[A-Z][A-Z_-]*\]?|\[[A-Za-z_ -]+\]")


def labelled(pattern: str, *, min_chars: int = 1) -> Finder:
    """A finder for the `body` of a labelled value (`--password X`) unless it is a placeholder."""

    def check(m: re.Match[str]) -> Span | None:
        body = m.group("body")
        if len(body) < min_chars or _METAVAR.fullmatch(body) or is_placeholder(body, bare=False):
            return None
        return m.span("body")

    return regex(pattern, check)


_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")


def pattern(kind: str, find: Finder, *anchors: str) -> SecretPattern:
    """A table row: the kind, its finder, and its lower-case anchor regexes."""
    literals = tuple(a for a in anchors if _REGEX_SYNTAX.isdisjoint(a))
    searched = tuple(re.compile(a) for a in anchors if a not in literals)
    return SecretPattern(kind, find, tuple(re.compile(a) for a in anchors), literals, searched)


def in_patches(find: Finder) -> Finder:
    """The finder, run also on a patch's lines without their ' ', '-' or '+' prefix.

    A rule that reads a structure over several lines (a YAML block) cannot see it in a
    unified diff (an Edit's patch), where every line starts with one of those.
    """

    def find_both(text: str) -> Iterator[Span]:
        yield from find(text)
        if "\n+" not in text and not text.startswith(("+", "@@")):
            return
        view_starts: list[int] = []  # where each line starts in the view, and in the text
        text_starts: list[int] = []
        parts: list[str] = []
        view_at = text_at = 0
        for line in text.split("\n"):
            cut = 1 if line[:1] in (" ", "+", "-") else 0
            view_starts.append(view_at)
            text_starts.append(text_at + cut)
            parts.append(line[cut:])
            view_at += len(line) - cut + 1
            text_at += len(line) + 1

        def back(at: int) -> int:
            i = bisect_right(view_starts, at) - 1
            return text_starts[i] + at - view_starts[i]

        for start, end in find("\n".join(parts)):
            yield back(start), back(end - 1) + 1 if end > start else back(start)

    return find_both
