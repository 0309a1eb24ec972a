"""How `memq mcp` frames what it returns: stored text as one-line data, within a size cap."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from worker.search.notes import NOTES_CLOSE, NOTES_OPEN, as_data

# Given how many items fit whole (and whether the next one is shown shortened), the line
# saying what was left out: memq's own voice, outside the notes block.
CutNote = Callable[[int, bool], str]


def cell(text: str | None, limit: int = 0) -> str:
    """A stored text as a Markdown table cell (pipes escaped)."""
    return as_data(text or "", limit).replace("|", "\\|")


def bounded(
    head: str, items: Sequence[str], *, footer: str, max_chars: int, cut_note: CutNote
) -> str:
    """`head` and as many whole `items` as fit in the notes block, then `footer`.

    Within `max_chars`; when items are left out (or the first one shortened), `cut_note` says
    so between the block and the footer.
    """

    def assemble(body: str, note: str) -> str:
        return f"{NOTES_OPEN}{head}{body}{NOTES_CLOSE}{note}{footer}"

    whole = assemble("".join(items), "")
    if len(whole) <= max_chars:
        return whole
    fixed = len(assemble("", ""))
    used, shown = 0, 0
    while shown < len(items) and (
        fixed + used + len(items[shown]) + len(cut_note(shown + 1, False)) <= max_chars
    ):
        used += len(items[shown])
        shown += 1
    if shown == 0 and items:
        # Not even one item fits whole: its beginning is more useful than nothing.
        note = cut_note(0, True)
        room = max(0, max_chars - fixed - len(note) - 2)
        return _clip(assemble(items[0][:room].rstrip() + "…\n", note), max_chars)
    return _clip(assemble("".join(items[:shown]), cut_note(shown, False)), max_chars)


def cut_line(
    max_chars: int, shown: int, shortened: bool, total: int, units: tuple[str, str], advice: str
) -> str:
    """The standard note: what the cap left out, and how to ask for the rest.

    `units` names one item and several, e.g. ("row", "rows").
    """
    one, many = units
    shows = f"the start of {one} 1 of {total}" if shortened else f"{shown} of {total} {many}"
    return (
        f"[memq cut this answer to MEMQ_MCP_MAX_CHARS={max_chars} characters: it shows {shows};"
        f" {advice}]\n"
    )


def counted(n: int, units: tuple[str, str]) -> str:
    """`n` and the unit it takes: 1 row, 2 rows."""
    return f"{n} {units[0] if n == 1 else units[1]}"


def _clip(text: str, max_chars: int) -> str:
    # Only a head longer than the whole cap gets here; keep the promise anyway.
    return text if len(text) <= max_chars else text[: max_chars - 2] + "…\n"
