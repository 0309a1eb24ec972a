"""`memq dlq list|replay`: dead-lettered events and dropped observer replies."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import msgspec
import typer

from pipeline.prompting.mode_files import load_mode
from pipeline.prompting.modes import Mode
from worker.cli.exits import BadInputError, settings_from_environment
from worker.cli.groups import add_group
from worker.settings import Settings


def register(app: typer.Typer) -> None:
    """Add the `dlq` command group."""
    add_group(
        app,
        "dlq",
        "Dead letters and dropped replies.",
        {"list": list_command, "replay": replay_command},
    )


def list_command(
    limit: Annotated[int, typer.Option("--limit", min=1)] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Dead-lettered events (`<prefix>:dead`) and dropped replies (kept for replay)."""

    async def read(settings: Settings) -> dict[str, Any]:
        from worker.keys import Keys
        from worker.ops.dead_letters import list_dead
        from worker.queue.arq_pool import connect_arq
        from worker.storage.factory import open_store

        redis = await connect_arq(settings)
        store = open_store(settings)
        try:
            dead = await list_dead(redis, Keys(settings.prefix), limit)
            dropped = await store.dropped(limit=limit)
        finally:
            await store.aclose()
            await redis.aclose()
        return {"dead": msgspec.to_builtins(dead), "dropped": msgspec.to_builtins(dropped)}

    data = asyncio.run(read(settings_from_environment()))
    if as_json:
        print(json.dumps(data))
        return
    for d in data["dead"]:
        print(f"dead {d['id']} session={d['session']} reason={d['reason']}")
    for d in data["dropped"]:
        print(f"dropped:{d['id']} session={d['memory_session_id']} category={d['category']}")
    if not data["dead"] and not data["dropped"]:
        print("nothing dead, nothing dropped")


def replay_command(
    ids: Annotated[
        list[str] | None,
        typer.Option("--id", help="A dead entry id, or dropped:N; repeatable."),
    ] = None,
    replay_all: Annotated[bool, typer.Option("--all", help="Replay everything.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Re-publish dead events; re-parse dropped replies with the current parser."""

    async def replay(settings: Settings, mode: Mode) -> list[Any]:
        from worker.keys import Keys
        from worker.ops.dead_letters import replay_dead, replay_dropped
        from worker.queue.arq_pool import connect_arq
        from worker.storage.factory import open_store

        keys = Keys(settings.prefix)
        dead_ids = None if replay_all else [i for i in ids or [] if not i.startswith("dropped:")]
        dropped_ids = {int(i.split(":", 1)[1]) for i in ids or [] if i.startswith("dropped:")}
        redis = await connect_arq(settings)
        store = open_store(settings)
        try:
            results = []
            if replay_all or dead_ids:
                results += await replay_dead(redis, keys, settings, dead_ids)
            rows = await store.dropped(limit=10_000)
            rows = [r for r in rows if replay_all or r.id in dropped_ids]
            if rows:
                results += await replay_dropped(redis, keys, store, mode, settings, rows)
            return results
        finally:
            await store.aclose()
            await redis.aclose()

    if not replay_all and not ids:
        raise BadInputError("say what to replay: --id ID (repeatable) or --all")
    for i in ids or []:
        if i.startswith("dropped:") and not i.split(":", 1)[1].isdigit():
            raise BadInputError(f"--id {i}: dropped ids look like dropped:12")
    settings = settings_from_environment()
    mode = load_mode(settings.mode, extra_dirs=settings.extra_modes_dirs)
    results = asyncio.run(replay(settings, mode))
    if as_json:
        print(json.dumps(msgspec.to_builtins(results)))
        return
    for r in results:
        print(f"{r.id} {r.status}{' ' + r.detail if r.detail else ''}")
    if not results:
        print("nothing matched")
