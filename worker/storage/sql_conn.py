"""The connection calls the backend-neutral Store logic makes; each backend adapts its driver."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

# Positional for statements both backends run (each numbers them in its own placeholder
# style: $1 or ?1); SQLite's own statements may also name them (:project).
Params = Sequence[Any] | Mapping[str, Any]
Row = Sequence[Any]
# A statement with its parameters, as a backend builds it for the shared logic.
Query = tuple[str, Params]


class SqlConn(Protocol):
    """One connection (or transaction) of a backend, through its driver's adapter."""

    async def fetch(self, sql: str, params: Params = ()) -> Sequence[Row]:
        """Every row the statement returns."""

    async def fetchrow(self, sql: str, params: Params = ()) -> Row | None:
        """The first row the statement returns, or None."""

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; how many rows it changed."""

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter row."""
