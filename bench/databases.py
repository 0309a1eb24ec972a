"""Where a bench's workers store: a SQLite file, or a database on a private PostgreSQL cluster
(the tests' PostgresServer); rows per table and the cluster's CPU."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg

from tests.support.postgres_server import PostgresServer

SHARED_PORT = 5432
# FTS5 keeps its index in shadow tables: counted apart from the rows memq writes itself.
_FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@contextmanager
def private_postgres() -> Iterator[PostgresServer | str]:
    """A started cluster on a free loopback port in a temp dir, or one line saying why not.

    A machine without the server binaries still runs the rest of a bench, so a missing
    cluster is a reason to print, not an exception.
    """
    try:
        server = PostgresServer()
    except RuntimeError as e:
        reason: str | None = f"not run: {e}"
    else:
        reason = _start(server)
    if reason is not None:
        yield reason
        return
    try:
        yield server
    finally:
        server.stop()


def _start(server: PostgresServer) -> str | None:
    """Start the cluster; why not, as one line, when it did not (removing its files)."""
    if server.port == SHARED_PORT:  # free_port() picks an ephemeral port; never the shared one
        server.stop()
        return "not run: the free port was 5432 (the shared PostgreSQL's)"
    try:
        server.start()
    except RuntimeError as e:
        server.stop()
        return f"not run: the private cluster did not start: {' '.join(str(e).split())[:300]}"
    return None


async def pg_table_rows(url: str) -> dict[str, int]:
    """Rows per table of the memq database at url (the search index is a column, no rows)."""
    conn = await asyncpg.connect(url)
    try:
        names = [
            r[0]
            for r in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        return {name: int(await conn.fetchval(f'SELECT count(*) FROM "{name}"')) for name in names}
    finally:
        await conn.close()


def sqlite_table_rows(db: Path) -> dict[str, int]:
    """Rows per table of the worker's SQLite file (FTS shadow tables summed as `fts index`)."""
    counts: dict[str, int] = {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
            )
        ]
        for name in names:
            (n,) = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()
            key = "fts index" if name.endswith(_FTS_SHADOWS) else name
            counts[key] = counts.get(key, 0) + int(n)
    return counts


class Database:
    """Where one run's workers store: a fresh SQLite file, or a fresh PostgreSQL database."""

    def __init__(self, data: Path, pg: PostgresServer | None) -> None:
        self.file = data / "memq.db"
        self.pg = pg
        self.url: str | None = None

    async def create(self) -> dict[str, str]:
        """The MEMQ_* settings that point the workers at this database."""
        if self.pg is None:
            return {}
        self.url = await self.pg.create_database()
        return {"database_url": self.url}

    async def rows(self) -> dict[str, int]:
        if self.url is None:
            return sqlite_table_rows(self.file)
        return await pg_table_rows(self.url)

    async def drop(self) -> None:
        if self.pg is not None and self.url is not None:
            await self.pg.drop_database(self.url)


def cluster_cpu_s(server: PostgresServer) -> float:
    """CPU seconds the cluster used: the postmaster, its live children and those it reaped.

    pg_ctl daemonizes the postmaster, so the bench's own rusage never sees it.
    """
    try:
        pid = int((server.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return 0.0
    total = sum(_stat(pid)[11:15])  # utime, stime, cutime, cstime (reaped backends)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if len(fields) > 12 and fields[1] == pid:
                total += fields[11] + fields[12]
    return total / _CLOCK_TICKS


def _stat(pid: int) -> list[int]:
    """The numeric fields of /proc/pid/stat after the command name (state left out as 0)."""
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []
    return [int(p) if p.lstrip("-").isdigit() else 0 for p in parts]
