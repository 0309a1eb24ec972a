"""`memq redis status|stop`: the Redis memq manages itself when MEMQ_REDIS_URL is unset."""

from __future__ import annotations

from typing import Annotated

import msgspec
import typer

from worker.cli.exits import EXIT_BAD_INPUT, fail, settings_from_environment
from worker.cli.groups import add_group
from worker.connect.managed_redis import ManagedRedis
from worker.masked_url import describe_url

JsonOption = Annotated[bool, typer.Option("--json", help="Print a JSON object.")]


def register(app: typer.Typer) -> None:
    """Add the `redis` command group to the memq app."""
    add_group(
        app,
        "redis",
        "The managed local Redis (used when MEMQ_REDIS_URL is unset).",
        {"status": status_command, "stop": stop_command},
    )


def status_command(as_json: JsonOption = False) -> None:
    """Say whether the managed redis-server runs, with its pid and socket."""
    settings = settings_from_environment()
    if settings.redis_url:
        url = describe_url(settings.redis_url)
        if as_json:
            print(msgspec.json.encode({"managed": False, "url": url}).decode())
        else:
            print(f"MEMQ_REDIS_URL is set ({url}): memq does not manage that Redis")
        return
    status = ManagedRedis(settings.data_path).status()
    if as_json:
        data = {"managed": True, **msgspec.structs.asdict(status)}
        print(msgspec.json.encode(data).decode())
    elif status.running:
        print(f"running (pid {status.pid}) on {status.socket}")
    else:
        print(f"not running ({status.directory})")


def stop_command() -> None:
    """Shut the managed redis-server down (its AOF keeps queued events)."""
    settings = settings_from_environment()
    if settings.redis_url:
        raise fail(
            "MEMQ_REDIS_URL is set: memq only stops the Redis it manages itself",
            EXIT_BAD_INPUT,
        )
    stopped = ManagedRedis(settings.data_path).stop()
    print("stopped" if stopped else "not running")
