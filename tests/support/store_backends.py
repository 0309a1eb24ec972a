"""The `backend` fixture: storage tests run on a fresh SQLite file and an emptied PostgreSQL db."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
import pytest

from tests.support.postgres_server import PostgresServer
from worker.storage.postgres import schema as postgres_schema
from worker.storage.postgres.store import PostgresStore
from worker.storage.protocol import Store
from worker.storage.sqlite import schema as sqlite_schema
from worker.storage.sqlite.store import SqliteStore

BACKENDS = ["sqlite", "postgres"]


class Backend:
    """One empty database of one backend: opens Store handles on it and queries it raw."""

    def __init__(self, name: str, *, path: Path | None = None, url: str | None = None) -> None:
        self.name = name
        self.path = path
        self.url = url
        self._opened: list[Store] = []

    @property
    def where(self) -> str:
        """How the store names its database in error messages."""
        if self.path is not None:
            return str(self.path)
        assert self.url is not None
        return PostgresStore(self.url).where

    @property
    def schema_version(self) -> int:
        return (
            sqlite_schema.SCHEMA_VERSION
            if self.name == "sqlite"
            else postgres_schema.SCHEMA_VERSION
        )

    def open(
        self, clock: Callable[[], datetime] | None = None, *, vector_queue: bool = True
    ) -> Store:
        """A new Store handle on this database, closed at teardown."""
        kw: dict[str, Any] = {"vector_queue": vector_queue}
        if clock is not None:
            kw["clock"] = clock
        store: Store
        if self.path is not None:
            store = SqliteStore(self.path, **kw)
        else:
            assert self.url is not None
            store = PostgresStore(self.url, **kw)
        self._opened.append(store)
        return store

    async def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of one SQL statement, run outside memq (standard SQL only)."""
        if self.path is not None:
            async with aiosqlite.connect(self.path) as conn:
                return [tuple(row) for row in await conn.execute_fetchall(sql)]
        conn = await asyncpg.connect(self.url)
        try:
            return [tuple(row) for row in await conn.fetch(sql)]
        finally:
            await conn.close()

    async def execute(self, sql: str) -> None:
        """Run one statement outside memq and commit it."""
        if self.path is not None:
            async with aiosqlite.connect(self.path) as conn:
                await conn.execute(sql)
                await conn.commit()
            return
        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def schema(self) -> list[tuple[Any, ...]]:
        """The tables, columns and indexes, to compare before and after a migration."""
        if self.path is not None:
            return await self.query("SELECT type, name, sql FROM sqlite_master ORDER BY name")
        return await self.query(
            "SELECT table_name::text, column_name::text, data_type::text"
            " FROM information_schema.columns WHERE table_schema = 'public'"
            " UNION ALL SELECT tablename::text, indexname::text, indexdef"
            " FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2"
        )

    async def stored_schema_version(self) -> int:
        if self.path is not None:
            ((version,),) = await self.query("PRAGMA user_version")
        else:
            ((version,),) = await self.query("SELECT MAX(version) FROM memq_schema_version")
        return int(version)

    async def set_schema_version(self, version: int) -> None:
        """Pretend a newer memq migrated the database."""
        if self.path is not None:
            await self.execute(f"PRAGMA user_version = {version:d}")
        else:
            await self.execute(f"INSERT INTO memq_schema_version (version) VALUES ({version:d})")

    async def aclose(self) -> None:
        for store in self._opened:
            await store.aclose()


@pytest.fixture(name="backend", params=BACKENDS)
async def backend_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh database of each backend; postgres runs on the private test cluster."""
    if request.param == "sqlite":
        backend = Backend("sqlite", path=tmp_path / "data" / "memq.db")
        yield backend
        await backend.aclose()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    backend = Backend("postgres", url=await server.emptied_database())
    yield backend
    await backend.aclose()
