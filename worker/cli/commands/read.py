"""`memq observations`, `memq sessions`, `memq stats`: the read side of storage and Redis."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import msgspec
import typer

from worker.cli.exits import settings_from_environment
from worker.settings import Settings

if TYPE_CHECKING:
    from worker.storage.protocol import Store

T = TypeVar("T")
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Limit = Annotated[int, typer.Option("--limit", min=1, help="How many rows at most.")]


def register(app: typer.Typer) -> None:
    """Add the read commands."""
    app.command("observations")(observations)
    app.command("sessions")(sessions)
    app.command("stats")(stats)


def observations(
    session: Annotated[str | None, typer.Option("--session", help="One memory session.")] = None,
    project: Annotated[str | None, typer.Option("--project", help="One project.")] = None,
    limit: Limit = 50,
    as_json: JsonFlag = False,
) -> None:
    """Newest stored observations and summaries first."""
    rows = _from_store(
        lambda store: store.observations(memory_session_id=session, project=project, limit=limit)
    )
    if as_json:
        print(msgspec.json.encode(rows).decode())
        return
    for r in rows:
        if r.kind == "observation":
            print(f"#{r.id} {r.created_at} [{r.project}] {r.type}: {r.title or '(untitled)'}")
            if r.subtitle:
                print(f"    {r.subtitle}")
        else:
            print(f"#{r.id} {r.created_at} [{r.project}] summary: {r.request or r.completed or ''}")


def sessions(
    project: Annotated[str | None, typer.Option("--project", help="One project.")] = None,
    limit: Limit = 50,
    as_json: JsonFlag = False,
) -> None:
    """Memory sessions with their prompt, observation and summary counts."""
    rows = _from_store(lambda store: store.sessions(project=project, limit=limit))
    if as_json:
        print(msgspec.json.encode(rows).decode())
        return
    for s in rows:
        ended = f" ended {s.ended_at}" if s.ended_at else ""
        print(
            f"{s.memory_session_id} [{s.project}] {s.observations} observations,"
            f" {s.summaries} summaries, {s.prompts} prompts, last {s.last_activity_at}{ended}"
        )


def stats(as_json: JsonFlag = False) -> None:
    """Streams pending, oldest pending age, outcomes, paused providers, dead letters, tokens."""
    from worker.keys import Keys
    from worker.ops.stats import collect_stats
    from worker.queue.arq_pool import connect_arq
    from worker.storage.factory import open_store

    async def read(settings: Settings) -> Any:
        redis = await connect_arq(settings)
        store = open_store(settings)
        try:
            return await collect_stats(redis, Keys(settings.prefix), store, settings)
        finally:
            await store.aclose()
            await redis.aclose()

    result = _run(read)
    data = msgspec.to_builtins(result)
    if as_json:
        print(json.dumps(data))
        if data["store_error"] is not None:
            raise typer.Exit(1)
        return
    print(f"redis primary: {data['redis_primary']}")
    st = data["streams"]
    print(
        f"streams: {st['pending']} pending in {st['sessions']} sessions,"
        f" oldest {st['oldest_pending_age_s']} s"
    )
    print("outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(data["outcomes"].items())))
    print(f"paused providers: {', '.join(data['paused_providers']) or 'none'}")
    print(f"dead letters: {data['dead_letters']}")
    tokens = data["tokens"]
    print(
        f"tokens: input={tokens['input']} cached_input={tokens['cached_input']}"
        f" output={tokens['output']}"
    )
    lag = data["vector_lag"]
    if data["vector_index"] == "off":
        print("vector index: off")
    elif lag is None:
        print("vector lag: unknown (the store does not answer)")
    else:
        oldest = data["vector_oldest_pending_s"]
        since = "" if oldest is None else f", the oldest stored {oldest} s ago"
        print(f"vector lag: {lag} rows waiting for the vector index{since}")
    if budget := data.get("budget"):
        print(_budget_line(budget))
    if (store := data["store"]) is None:
        print(f"store: unreachable: {data['store_error']}")
    else:
        print(
            f"store: {store['observations']} observations, {store['summaries']} summaries,"
            f" {store['sessions']} sessions, {store['dropped_outputs']} dropped replies"
        )
    if cost := data.get("cost"):
        print("\n".join(_cost_lines(cost)))
    if data["store_error"] is not None:
        raise typer.Exit(1)  # a service unreachable, as every command says it


def _budget_line(budget: dict[str, Any]) -> str:
    """`budget 2026-11-30 UTC: 1200 of 5000 tokens; per project (limit 2000): alpha=1200`."""
    limit = budget["limit"] or "unlimited"
    projects = ", ".join(f"{p}={n}" for p, n in budget["projects"].items()) or "none"
    per_project = budget["project_limit"] or "unlimited"
    return (
        f"budget {budget['day']} UTC: {budget['used']} of {limit} tokens;"
        f" per project (limit {per_project}): {projects}"
    )


def _cost_lines(cost: dict[str, Any]) -> list[str]:
    """The cost section: the window's totals, tokens per observation, a project-day table."""
    priced = cost["prices"] is not None
    lines = [
        f"cost {cost['first_day']}..{cost['last_day']} UTC ({cost['window_days']} days):"
        f" {cost['calls']} observer calls, {cost['observations']} observations stored",
        f"  tokens: input={cost['input_tokens']} cached_input={cost['cached_input_tokens']}"
        f" output={cost['output_tokens']}"
        + (f"; spend {_money(cost['spend'])} at the MEMQ_PRICE_* prices" if priced else "")
        + (
            f"; USD {_money(cost['reported_cost_usd'])} as the observer reported it"
            if cost.get("reported_cost_usd") is not None
            else ""
        ),
    ]
    per = cost["per_observation"]
    lines.append(
        "  tokens per observation: "
        + (
            f"input={per['input_tokens']} cached_input={per['cached_input_tokens']}"
            f" output={per['output_tokens']}"
            if per
            else "none stored"
        )
    )
    header = ["day", "project", "calls", "observations", "input", "cached_input", "output"]
    table = [
        [
            d["day"],
            d["project"],
            *(str(d[k]) for k in ("calls", "observations", "input_tokens")),
            *(str(d[k]) for k in ("cached_input_tokens", "output_tokens")),
        ]
        + ([_money(d["spend"])] if priced else [])
        for d in cost["days"]
    ]
    header += ["spend"] if priced else []
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        lines.append(
            "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        )
    return lines


def _money(spend: float) -> str:
    # No currency sign: the prices are in whatever currency the user set them in.
    return f"{spend:.4f}"


def _from_store(read: Callable[[Store], Coroutine[Any, Any, T]]) -> T:
    """What `read` returns from the Store the settings name, closed afterwards."""
    from worker.storage.factory import open_store

    async def run(settings: Settings) -> T:
        store = open_store(settings)
        try:
            return await read(store)
        finally:
            await store.aclose()

    return _run(run)


def _run(read: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    settings = settings_from_environment()
    return asyncio.run(read(settings))
