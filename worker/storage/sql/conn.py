"""The connection calls the backend-neutral Store logic makes; each backend adapts its driver."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

# Positional for statements both backends run (each numbers them in its own placeholder
# style: $1 or ?1); SQLite's own statements may also name them (:project).
Params = Sequence[Any] | Mapping[str, Any]
# A statement with its parameters, as a backend builds it for the shared logic.
Query = tuple[str, Params]


class Row(Protocol):
    """A result row read by column name (sqlite3.Row, asyncpg.Record)."""

    def __getitem__(self, column: str, /) -> Any: ...

    def keys(self) -> Iterable[str]:
        """The row's column names."""


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


class SqlDatabase(Protocol):
    """A backend's connections: opened on first use, errors raised as StoreError."""

    @property
    def where(self) -> str:
        """The database as error messages name it (no credentials)."""

    def use(self) -> AbstractAsyncContextManager[SqlConn]:
        """A connection, each statement its own transaction."""

    def bounded(self, timeout_s: float) -> AbstractAsyncContextManager[SqlConn]:
        """A connection whose statements stop after `timeout_s` in all (SearchTimeoutError)."""

    def transaction(self) -> AbstractAsyncContextManager[SqlConn]:
        """A connection inside one write transaction, committed when the block ends cleanly."""

    async def migrate(self) -> None:
        """Create or upgrade the schema to the current version."""

    async def aclose(self) -> None:
        """Close the connections (the next call opens new ones)."""
