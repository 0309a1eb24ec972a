"""`memq hook claude-code` on a Read of a FIFO or a device: the event is recorded, unhashed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from pipeline.events import ToolCall, decode_event
from tests.support.ingest import console_script, subprocess_env
from worker.keys import Keys

pytestmark = pytest.mark.slow  # runs the memq console script

DATA = Path(__file__).resolve().parents[2] / "data" / "claude_code"
SESSION = "9f2c1e7a-4b3d-4e8f-a1c2-5d6e7f809a1b"


def _read_payload(file_path: str, tool_use_id: str) -> bytes:
    payload = json.loads((DATA / "post_tool_use.json").read_text())
    payload.update(
        tool_name="Read",
        tool_input={"file_path": file_path},
        tool_response={"type": "text", "file": {"filePath": file_path, "content": ""}},
        tool_use_id=tool_use_id,
    )
    return json.dumps(payload).encode()


def _hook(
    stdin: bytes, data_dir: Path, redis_url: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [console_script(), "hook", "claude-code"],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=data_dir,
        env=subprocess_env(data_dir, redis_url, MEMQ_PREFIX="t"),
        check=False,
    )
    return done, time.monotonic() - started


async def test_a_read_of_a_fifo_or_dev_zero_is_recorded_without_its_hash(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    regular = tmp_path / "a.py"
    regular.write_bytes(b"a = 1\n")
    reads = [(str(fifo), "toolu_fifo"), ("/dev/zero", "toolu_zero"), (str(regular), "toolu_file")]
    for file_path, tool_use_id in reads:
        done, took_s = _hook(_read_payload(file_path, tool_use_id), tmp_path, redis_url)
        # Before: the FIFO's open() blocked and the watchdog gave up at 0.9 s, recording nothing.
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert took_s < 0.9, f"{file_path}: {took_s:.2f} s"
    entries = await redis.xrange(Keys("t").events(SESSION))
    calls = [decode_event(fields[b"event"]) for _, fields in entries]
    assert all(isinstance(c, ToolCall) for c in calls)
    assert [c.file_hashes for c in calls] == [  # type: ignore[union-attr]
        {str(fifo): None},
        {"/dev/zero": None},
        {str(regular): hashlib.sha256(b"a = 1\n").hexdigest()},
    ]
