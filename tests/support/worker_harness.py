"""Run the real worker in-process against real Redis, SQLite and the fake observer."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from arq.connections import ArqRedis

from pipeline.events import End, Event, Prompt, Summarize, ToolCall, encode_event
from worker.queue.scheduling import Scheduler
from worker.sessions.jobs import build_runtime, build_worker, close_runtime
from worker.sessions.runtime import Runtime
from worker.settings import Settings, load_settings
from worker.storage.sqlite.store import SqliteStore

_COUNTER = itertools.count(1)
_T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def make_settings(
    data_dir: Path, redis_url: str, observer_url: str, provider: str = "anthropic", **extra: str
) -> Settings:
    """Settings as a test machine would have them: everything local, short waits."""
    env = {
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_REDIS_URL": redis_url,
        "MEMQ_OBSERVER": provider,
        "MEMQ_MODEL": "test-model",
        "MEMQ_BATCH_WAIT_MS": "0",
        "MEMQ_BATCH_MAX_WAIT_S": "0",  # every turn due at once unless a test says otherwise
        "MEMQ_RETRY_BASE_S": "0.05",
        "MEMQ_RETRY_MAX_S": "0.2",
        "MEMQ_JOB_TIMEOUT_S": "20",
        "MEMQ_OBSERVER_TIMEOUT_S": "5",
        **{f"MEMQ_{k.upper()}": v for k, v in extra.items()},
    }
    if provider in ("anthropic", "claude-code"):  # claude-code: its CLI gets both
        env |= {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": observer_url}
    else:
        env |= {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": observer_url + "/v1"}
    return load_settings(env)


def tool_call(
    session: str, n: int, *, tool: str = "Bash", output: Any = None, **kw: Any
) -> ToolCall:
    """A tool call event with a unique id and a distinct command."""
    return ToolCall(
        event_id=f"{session}-t{n}-{next(_COUNTER)}",
        memory_session_id=session,
        project=kw.pop("project", "demo"),
        occurred_at=_T0 + timedelta(seconds=n),
        tool_name=tool,
        tool_input=kw.pop("tool_input", {"command": f"echo step {n}"}),
        tool_output=output if output is not None else f"step {n} done",
        cwd="/work/demo",
        **kw,
    )


def prompt(session: str, n: int, text: str) -> Prompt:
    """A user request event."""
    return Prompt(
        event_id=f"{session}-p{n}-{next(_COUNTER)}", memory_session_id=session, project="demo",
        occurred_at=_T0 + timedelta(seconds=n), prompt_text=text, prompt_number=n,
    )  # fmt: skip


def summarize(session: str, message: str = "All done.") -> Summarize:
    """A summary request event."""
    return Summarize(
        event_id=f"{session}-s-{next(_COUNTER)}", memory_session_id=session, project="demo",
        occurred_at=_T0 + timedelta(minutes=5), last_assistant_message=message,
    )  # fmt: skip


def end(session: str) -> End:
    """A session-end event."""
    return End(
        event_id=f"{session}-e-{next(_COUNTER)}", memory_session_id=session, project="demo",
        occurred_at=_T0 + timedelta(minutes=10), reason="exit",
    )  # fmt: skip


async def publish(redis: ArqRedis, settings: Settings, *events: Event) -> None:
    """Publish events through the same atomic script the producer uses."""
    from worker.ingest.producer import event_publish_args
    from worker.keys import Keys

    scheduler = Scheduler(redis, Keys(settings.prefix))
    for event in events:
        args = event_publish_args(scheduler.keys, settings, event, encode_event(event))
        status, _ = await scheduler.publish(args)
        assert status in (0, 1)


@asynccontextmanager
async def running_runtime(settings: Settings, redis: ArqRedis) -> AsyncIterator[Runtime]:
    """A Runtime as `memq worker` builds it, closed afterwards."""
    rt = await build_runtime(settings, redis)
    try:
        yield rt
    finally:
        await close_runtime(rt)


async def drain(rt: Runtime, redis: ArqRedis, *, timeout_s: float = 30.0) -> int:
    """Run a burst worker until the queue is empty (deferred jobs included); jobs run."""
    worker = build_worker(rt.settings, redis, burst=True, runtime=rt, with_cron=False)
    try:
        return await asyncio.wait_for(worker.run_check(), timeout_s)
    finally:
        await worker.close()


def sqlite_store(settings: Settings) -> SqliteStore:
    """A second handle on the worker's SQLite file, for assertions."""
    return SqliteStore(settings.data_path / "memq.db")
