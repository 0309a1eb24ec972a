"""Telegram message text for a stored row: which rows, HTML with escaping, split under 4,096."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import msgspec

from worker.errors import ConfigError
from worker.storage.records import StoredRow

TELEGRAM_LIMIT = 4096
_PART_MARK_RESERVE = 24  # room for the "(12/12)" line multi-part messages start with
_SUMMARY_FIELDS = (
    ("request", "Request"),
    ("investigated", "Investigated"),
    ("learned", "Learned"),
    ("completed", "Completed"),
    ("next_steps", "Next steps"),
    ("notes", "Notes"),
)


def escape(text: str) -> str:
    """Text made safe for Telegram's HTML parse mode (`&`, `<`, `>`)."""
    return html.escape(text, quote=False)


def telegram_length(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def split_csv(value: str) -> list[str]:
    """Comma-separated items, trimmed, empty ones left out."""
    return [item.strip() for item in value.split(",") if item.strip()]


class RowFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which rows go out: a listed type (None: every row), or any listed concept."""

    types: frozenset[str] | None
    concepts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, types: str, concepts: str) -> RowFilter:
        """From MEMQ_TELEGRAM_TYPES (`*` for all; `summary` for summaries) and _CONCEPTS."""
        listed = split_csv(types)
        if "*" in listed and len(listed) > 1:
            raise ConfigError("MEMQ_TELEGRAM_TYPES is `*` or a list of type ids, not both")
        return cls(
            types=None if listed == ["*"] else frozenset(listed),
            concepts=frozenset(split_csv(concepts)),
        )

    def matches(self, row: StoredRow) -> bool:
        """True when the row should be sent."""
        if self.types is None:
            return True
        kind = row.type if row.kind == "observation" else "summary"
        return kind in self.types or not self.concepts.isdisjoint(row.concepts or ())


class Block(msgspec.Struct, frozen=True):
    """A paragraph: markup around plain text; split pieces repeat the markup."""

    open: str
    text: str
    close: str = ""
    gap: str = "\n\n"  # what separates it from the block before


def row_blocks(row: StoredRow, emoji: Mapping[str, str]) -> list[Block]:
    """The paragraphs of one row's message, its project and session last."""
    if row.kind == "summary":
        blocks = [Block("📋 <b>", "Summary", "</b>")]
        for field, label in _SUMMARY_FIELDS:
            value = getattr(row, field)
            if value:
                blocks.append(Block(f"<b>{label}:</b> ", value, gap="\n"))
    else:
        kind = row.type or "observation"
        mark = emoji.get(kind, "•")
        blocks = [Block(f"{escape(mark)} <b>{escape(kind)}</b> · <b>", row.title or "", "</b>")]
        if row.subtitle:
            blocks.append(Block("<i>", row.subtitle, "</i>", gap="\n"))
        if row.narrative:
            blocks.append(Block("", row.narrative))
        for i, fact in enumerate(row.facts or ()):
            blocks.append(Block("• ", fact, gap="\n" if i else "\n\n"))
        if row.concepts:
            blocks.append(Block("", " ".join(f"#{c.replace('-', '_')}" for c in row.concepts)))
        files = [*(row.files_read or ()), *(row.files_modified or ())]
        if files:
            blocks.append(Block("<b>Files:</b> <code>", ", ".join(files), "</code>", gap="\n"))
    where = f"project <code>{escape(row.project)}</code> · session "
    blocks.append(Block(where + "<code>", row.memory_session_id, f"</code> · #{row.id}"))
    return blocks


def split_blocks(blocks: Sequence[Block], limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Pack blocks into messages of at most `limit` UTF-16 units, never cutting markup."""
    budget = limit - _PART_MARK_RESERVE
    messages: list[str] = []
    current = ""
    for block in blocks:
        for n, piece in enumerate(_fit(block, budget)):
            gap = block.gap if n == 0 else "\n"
            if current and telegram_length(current + gap + piece) > budget:
                messages.append(current)
                current = piece
            else:
                current = f"{current}{gap}{piece}" if current else piece
    if current:
        messages.append(current)
    if len(messages) == 1:
        return messages
    return [f"<i>({i}/{len(messages)})</i>\n{m}" for i, m in enumerate(messages, 1)]


def render_row(row: StoredRow, emoji: Mapping[str, str], limit: int = TELEGRAM_LIMIT) -> list[str]:
    """The message(s) announcing one row."""
    return split_blocks(row_blocks(row, emoji), limit)


def _fit(block: Block, budget: int) -> list[str]:
    whole = f"{block.open}{escape(block.text)}{block.close}"
    if telegram_length(whole) <= budget:
        return [whole]
    room = budget - telegram_length(block.open + block.close)
    if room < 16:
        raise ValueError(f"limit {budget} leaves no room for text in a block")
    pieces: list[str] = []
    rest = block.text
    while rest:
        cut = _cut(rest, room)
        pieces.append(f"{block.open}{escape(rest[:cut].rstrip())}{block.close}")
        rest = rest[cut:].lstrip()
    return pieces


def _cut(text: str, room: int) -> int:
    """How many characters of text fit in `room` once escaped; prefers a whitespace cut."""
    used = 0
    end = 0
    for end, char in enumerate(text):  # noqa: B007 - `end` is read after the loop
        used += telegram_length(escape(char))
        if used > room:
            break
    else:
        return len(text)
    space = max(text.rfind(" ", 0, end), text.rfind("\n", 0, end))
    return space if space > end * 3 // 4 else max(end, 1)
