"""SessionStart with freshness checks: `memq hook claude-code` wall time over 200 evidence files.

Run from the repository root: `.venv/bin/python bench/freshness.py` (under a minute). It builds
a checkout of 200 source files and a SQLite store whose 100 newest observations name 2 files
each (a quarter edited since), then times whole SessionStart hook processes with and without
stored hashes, and the freshness check alone.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CpuMeter, machine, markdown_table, percentile
from worker.search.freshness import Freshness
from worker.storage.records import BatchWrite, ObservationRow
from worker.storage.sqlite.store import SqliteStore

FILES = 200
OBSERVATIONS = 100
RUNS = 100


def make_checkout(root: Path) -> dict[str, str]:
    """200 files of 1-12 KB under `root` (a git checkout); their SHA-256 by relative path."""
    (root / ".git").mkdir(parents=True)
    hashes = {}
    for i in range(FILES):
        rel = f"pkg{i % 10}/module_{i}.py"
        text = "".join(f"def f_{i}_{j}(x):\n    return x + {j}\n" for j in range(30 + i % 300))
        (root / rel).parent.mkdir(exist_ok=True)
        (root / rel).write_text(text)
        hashes[rel] = hashlib.sha256(text.encode()).hexdigest()
    for rel in list(hashes)[::4]:  # a quarter edited after the observations were made
        with open(root / rel, "a") as f:
            f.write("# edited\n")
    return hashes


async def make_store(path: Path, root: Path, hashes: dict[str, str], *, hashed: bool) -> None:
    store = SqliteStore(path)
    await store.migrate()
    rels = list(hashes)
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    records = []
    for i in range(OBSERVATIONS):
        mine = rels[2 * i : 2 * i + 2]
        records.append(
            ObservationRow(
                memory_session_id="s1",
                project="proj",
                type="discovery",
                title=f"Module {i}",
                subtitle=None,
                facts=[f"fact {i}"],
                narrative=f"What module {i} does. " * 8,
                concepts=[],
                files_read=[str(root / r) for r in mine],
                files_modified=[],
                prompt_number=1,
                content_hash=f"h{i}",
                created_at=t0 + timedelta(seconds=i),
                file_hashes={r: hashes[r] for r in mine} if hashed else {},
            )
        )
    await store.write_batch(
        BatchWrite(
            memory_session_id="s1", project="proj", fence=1, event_ids=[], observations=records
        )
    )
    await store.aclose()


def hook_times(root: Path, data_dir: Path, runs: int) -> tuple[list[float], int]:
    """Wall times of SessionStart hook processes, and how many printed no context (out of
    time: the hook gives storage what is left of its 0.65 s work budget)."""
    command = [str(Path(sys.executable).parent / "memq"), "hook", "claude-code"]
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(data_dir),
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_REDIS_URL": "redis://127.0.0.1:9/0",  # SessionStart publishes nothing
        "PYTHONPYCACHEPREFIX": str(data_dir.parent / "pycache"),
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]  # a worktree's code, not the installed one
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": "s2", "cwd": str(root)})
    times, empty = [], 0
    for i in range(-2, runs):  # two warm-up runs fill the bytecode cache
        started = time.perf_counter()
        done = subprocess.run(command, input=payload, env=env, cwd=root, capture_output=True,
                              text=True, check=False)  # fmt: skip
        elapsed = time.perf_counter() - started
        if i >= 0 and (done.returncode != 0 or done.stderr):
            raise SystemExit(f"hook run failed: {done.returncode} {done.stderr}")
        if i >= 0:
            times.append(elapsed)
            empty += "memq-notes" not in done.stdout
    return times, empty


async def check_times(root: Path, db: Path, runs: int) -> tuple[list[float], int]:
    store = SqliteStore(db)
    rows = await store.observations(project="proj", limit=OBSERVATIONS)
    await store.aclose()
    times, stale = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        marked = Freshness(root).mark(rows)
        times.append(time.perf_counter() - started)
        stale = sum(len(r.stale_files or ()) for r in marked)
    return times, stale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"Hook runs (default {RUNS}).")
    options = parser.parse_args()
    meter = CpuMeter()
    with tempfile.TemporaryDirectory(prefix="mqfresh") as tmp:
        root = Path(tmp) / "proj"
        hashes = make_checkout(root)
        rows = []
        for hashed in (False, True):
            data = Path(tmp) / f"data-{hashed}"
            data.mkdir()
            asyncio.run(make_store(data / "memq.db", root, hashes, hashed=hashed))
            times, empty = hook_times(root, data, options.runs)
            label = f"{FILES} files checked" if hashed else "no stored hashes (no checks)"
            rows.append([f"SessionStart hook, {options.runs} runs ({empty} out of time)", label,
                         f"{percentile(times, 50) * 1000:.0f} ms",
                         f"{percentile(times, 99) * 1000:.0f} ms"])  # fmt: skip
            if hashed:
                checks, stale = asyncio.run(check_times(root, data / "memq.db", options.runs))
                rows.append([f"`Freshness.mark`, {options.runs} runs",
                             f"{FILES} files, {stale} stale",
                             f"{percentile(checks, 50) * 1000:.1f} ms",
                             f"{percentile(checks, 99) * 1000:.1f} ms"])  # fmt: skip
    print(f"Machine: {machine()}; {meter.report()}\n")
    print(markdown_table(["measurement", "store", "p50", "p99"], rows))


if __name__ == "__main__":
    main()
