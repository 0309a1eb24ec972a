"""Privacy tags: remove `<private>…</private>` and the other withheld regions from text."""

from __future__ import annotations

import re

from pipeline.replies.textnorm import js_trim

PRIVATE_TAG_NAMES: tuple[str, ...] = (
    "private",
    "claude-mem-context",
    "system_instruction",
    "system-instruction",
    "persisted-output",
    "system-reminder",
    "memq-context",
    "memq-notes",  # memq's own answers (SessionStart context, MCP results): never re-observed
    "hook_context",  # Gemini CLI's wrapper of hook-injected context inside a prompt
)

# One tag token: opening, closing or self-closing, any case, attributes allowed. The
# name must end at whitespace, `/` or `>` (`<private-notes>` is not a tag). Attributes
# cannot hold `<`, so a failed attempt stops at the next `<` and a scan stays linear.
_NAMES = "|".join(re.escape(name) for name in PRIVATE_TAG_NAMES)
_TAG = re.compile(rf"<(/?)({_NAMES})(?=[\s/>])[^<>]*>", re.IGNORECASE | re.ASCII)
_NAME_END = frozenset(" \t\n\r\f\v/")
_HEAD_LEN = 2 + max(len(name) for name in PRIVATE_TAG_NAMES)
_NAME_PREFIXES = frozenset(name[:i] for name in PRIVATE_TAG_NAMES for i in range(len(name) + 1))
_SORTED_NAMES = tuple(sorted(PRIVATE_TAG_NAMES, key=len))
# Literal alphabets: importing `string` compiles its Template pattern (~1 ms of every hook).
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def strip_private_tags(text: str) -> str:
    """Remove every withheld region (tags and content); the rest is kept byte for byte.

    Same-name tags nest; a region left unclosed runs to the end of the text (privacy over
    completeness); stray closing tags stay. The result is not trimmed: it may be a piece
    of a JSON value. A fragment such as `<priv` that would fuse with the text after a
    removed region into a new opening tag is dropped too, so stripping is idempotent.
    """
    if "<" not in text:
        return text
    out: list[str] = []
    open_lts: list[tuple[int, int]] = []  # (piece index, offset after its last `>`)
    pos = 0
    region: str | None = None
    depth = 0
    for m in _TAG.finditer(text):
        closing = m.group(1) == "/"
        name = m.group(2).lower()
        self_closing = not closing and m.group(0).endswith("/>")
        if region is None:
            _emit(out, open_lts, text[pos : m.start()])
            if closing:
                _emit(out, open_lts, m.group(0))
            elif self_closing:
                _drop_fusable_tail(out, open_lts)
            else:
                region, depth = name, 1
            pos = m.end()
        elif name == region and not self_closing:
            depth += -1 if closing else 1
            if depth == 0:
                region = None
                _drop_fusable_tail(out, open_lts)
                pos = m.end()
    if region is None:
        _emit(out, open_lts, text[pos:])
    return "".join(out)


def strip_private_value(value: object) -> object:
    """Return a copy of a JSON value with withheld regions stripped from every string.

    Keys are stripped too; when two keys become equal the later one wins.
    """
    if isinstance(value, str):
        return strip_private_tags(value)
    if isinstance(value, list):
        return [strip_private_value(item) for item in value]
    if isinstance(value, dict):
        return {strip_private_value(key): strip_private_value(item) for key, item in value.items()}
    return value


def is_entirely_private(text: str) -> bool:
    """True when the text has content and nothing but whitespace survives stripping."""
    # JavaScript's whitespace set (reference §12), so "blank" means what it meant upstream.
    return bool(js_trim(text)) and not js_trim(strip_private_tags(text))


def _emit(out: list[str], open_lts: list[tuple[int, int]], piece: str) -> None:
    # A `<` after the last `>` may still become a tag: remember the piece holding it and
    # where its unfinished part starts.
    if not piece:
        return
    gt = piece.rfind(">")
    if gt >= 0:
        open_lts.clear()
    if piece.find("<", gt + 1) >= 0:
        open_lts.append((len(out), gt + 1))
    out.append(piece)


def _drop_fusable_tail(out: list[str], open_lts: list[tuple[int, int]]) -> None:
    # Only the last unfinished `<` can join the text after a removed region. Once it
    # cannot become an opening tag it never will (text is only appended), and the
    # earlier ones are then out of reach for good. Each `<` is inspected at most once.
    while open_lts:
        index, floor = open_lts[-1]
        piece = out[index]
        parts = piece[floor:].split("<")  # parts[k] is the text after the k-th `<`
        last = len(parts) - 1
        follow = _head_of(out, index + 1, _HEAD_LEN)
        k = last
        if k and _may_become_opener((parts[k][:_HEAD_LEN] + follow)[: _HEAD_LEN - 1]):
            k -= 1
            verdicts: dict[str, bool] = {}
            while k:
                if parts[k]:  # an empty part (`<<`) can always grow into a tag
                    head = parts[k][: _HEAD_LEN - 1]
                    viable = verdicts.get(head)
                    if viable is None:
                        viable = verdicts[head] = _may_become_opener(head)
                    if not viable:
                        break
                k -= 1
        if k < last:
            out[index] = piece[:floor] + "<".join(parts[: k + 1])
            del out[index + 1 :]
        if k > 0:
            open_lts.clear()
            return
        open_lts.pop()


def _head_of(pieces: list[str], start: int, size: int) -> str:
    head = ""
    for piece in pieces[start:]:
        if len(head) >= size:
            break
        head += piece[: size - len(head)]
    return head


def _may_become_opener(head: str) -> bool:
    head = head.translate(_ASCII_LOWER)
    if head in _NAME_PREFIXES:
        return True
    return any(head.startswith(name) and head[len(name)] in _NAME_END for name in _SORTED_NAMES)
