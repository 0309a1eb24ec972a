"""Cost-query bench: how long `Store.cost_by_day` (the `memq stats` cost section and the UI's
charts) takes as token_usage and observations grow, on SQLite and a private PostgreSQL.

Run from the repository root: `.venv/bin/python bench/cost.py` (about a minute). Each size
is N observer calls and N observations spread evenly over 60 days in 8 projects, so the
14-day window holds about 14/60 of them; the time is the median of 7 reads after one warm-up.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg

from bench.common import machine, markdown_table, percentile
from bench.databases import private_postgres
from worker.storage.postgres.store import PostgresStore
from worker.storage.protocol import Store
from worker.storage.sql.params import epoch_ms, iso_utc
from worker.storage.sqlite.store import SqliteStore

SIZES = (10_000, 100_000, 400_000)
SPREAD_DAYS = 60
READS = 7
_USAGE = ("memory_session_id", "project", "provider", "model", "input_tokens",
          "cached_input_tokens", "output_tokens", "created_at")  # fmt: skip
_OBS = ("memory_session_id", "project", "type", "title", "narrative", "prompt_number",
        "content_hash", "created_at", "created_at_epoch_ms")  # fmt: skip


def _rows(n: int, now: datetime) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    rnd = random.Random(1)
    usage, obs = [], []
    for i in range(n):
        at = now - timedelta(seconds=rnd.uniform(0, SPREAD_DAYS * 86400))
        sid, project = f"s{i % 500}", f"p{i % 8}"
        usage.append((sid, project, "anthropic", "m", 3000, 1000, 200, iso_utc(at)))
        obs.append((sid, project, "discovery", "t", "n", 1, f"h{i}", iso_utc(at), epoch_ms(at)))
    return usage, obs


def _sessions(now: datetime) -> list[tuple[Any, ...]]:
    return [(f"s{i}", f"p{i % 8}", 1, iso_utc(now), iso_utc(now)) for i in range(500)]


_SESSIONS_SQL = ("INSERT INTO sessions (memory_session_id, project, fence, started_at,"
                 " last_activity_at) VALUES ({})")  # fmt: skip


async def _load_sqlite(path: Path, n: int, now: datetime) -> Store:
    store = SqliteStore(path, clock=lambda: now)
    await store.migrate()
    usage, obs = _rows(n, now)
    with sqlite3.connect(path) as conn:
        conn.executemany(_SESSIONS_SQL.format("?, ?, ?, ?, ?"), _sessions(now))
        conn.executemany(f"INSERT INTO token_usage ({', '.join(_USAGE)}) VALUES"
                         f" ({', '.join('?' * len(_USAGE))})", usage)  # fmt: skip
        conn.executemany(f"INSERT INTO observations ({', '.join(_OBS)}) VALUES"
                         f" ({', '.join('?' * len(_OBS))})", obs)  # fmt: skip
    return store


async def _load_postgres(url: str, n: int, now: datetime) -> Store:
    store = PostgresStore(url, clock=lambda: now)
    await store.migrate()
    usage, obs = _rows(n, now)
    conn = await asyncpg.connect(url)
    try:
        await conn.executemany(_SESSIONS_SQL.format("$1, $2, $3, $4, $5"), _sessions(now))
        await conn.copy_records_to_table("token_usage", records=usage, columns=_USAGE)
        await conn.copy_records_to_table("observations", records=obs, columns=_OBS)
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return store


async def _time(store: Store) -> tuple[float, int]:
    await store.cost_by_day()
    times = []
    for _ in range(READS):
        start = time.perf_counter()
        found = await store.cost_by_day()
        times.append((time.perf_counter() - start) * 1000)
    await store.aclose()
    return percentile(times, 50), len(found)


async def main() -> None:
    now = datetime.now(UTC)
    table: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp, private_postgres() as pg:
        for n in SIZES:
            sqlite = await _load_sqlite(Path(tmp) / f"cost-{n}.db", n, now)
            ms, days = await _time(sqlite)
            table.append(["SQLite", n, days, round(ms, 1)])
        if isinstance(pg, str):
            print(f"PostgreSQL {pg}")
        else:
            for n in SIZES:
                ms, days = await _time(await _load_postgres(await pg.create_database(), n, now))
                table.append(["PostgreSQL", n, days, round(ms, 1)])
    print(machine())
    print(markdown_table(["backend", "calls = observations", "project-days", "median ms"], table))


if __name__ == "__main__":
    asyncio.run(main())
