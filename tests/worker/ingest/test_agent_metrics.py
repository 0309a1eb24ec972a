"""`memq agent`'s /metrics: what it published itself, what it spooled and why, what it flushed
later, and what waits in the spool now, against a real redis-server."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.support.hook_agent import KINDS, agent_settings, eventually, payload, running_agent
from tests.support.metric_samples import metric_samples
from tests.support.redis_server import RedisServer
from worker.ingest.agent import HOOK_PATH
from worker.ingest.agent_metrics import SPOOL_REASONS
from worker.ingest.relay import RELAY_QUERY, TARGET_HEADER, target

pytestmark = pytest.mark.slow  # runs uvicorn and redis-server processes

# Stop re-sends the turn's Bash call (read back from the transcript): one event more, which
# Redis has seen (a duplicate, not counted as published).
EVENTS = len(KINDS) + 1
ADDED = len(KINDS)


async def _samples(client: httpx.AsyncClient) -> dict[str, float]:
    """The agent's /metrics, keyed as Prometheus prints a sample: `name{label="value"}`."""
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    return {_key(name, labels): v for (name, labels), v in metric_samples(answer.text).items()}


def _key(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{inner}}}" if labels else name


async def _post_all(client: httpx.AsyncClient, session: str = "m1") -> None:
    for name, _ in KINDS:
        body = payload(name, session_id=session)
        assert (await client.post(HOOK_PATH, content=body)).status_code == 200


def _spooled(reason: str) -> str:
    return f'memq_agent_spooled_events_total{{reason="{reason}"}}'


async def test_events_published_spooled_while_redis_is_down_and_flushed_after(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "redis").start()
    try:
        async with running_agent(agent_settings(tmp_path / "data", server.url)) as client:
            before = await _samples(client)
            assert {_spooled(r) for r in SPOOL_REASONS} <= before.keys()
            assert before["memq_agent_stalled"] == 0
            await _post_all(client)

            async def published() -> bool:
                return (await _samples(client))["memq_agent_published_events_total"] == ADDED

            await eventually(published)
            server.stop()
            await _post_all(client, "m2")  # new events: a flush of old ones would add nothing

            async def spooled() -> bool:
                now = await _samples(client)
                return now[_spooled("redis_unavailable")] + now[_spooled("behind_spool")] == EVENTS

            await eventually(spooled)
            down = await _samples(client)
            assert down["memq_agent_spool_events"] == EVENTS
            assert down[_spooled("redis_unavailable")] >= 1
            server.start()

            async def flushed() -> bool:
                # The re-sent call leaves the spool too, as the duplicate Redis reports.
                return (await _samples(client))["memq_agent_flushed_events_total"] == EVENTS

            await eventually(flushed, timeout_s=10)
            after = await _samples(client)
    finally:
        server.stop()
    assert after["memq_agent_spool_events"] == 0
    assert after["memq_agent_published_events_total"] == ADDED  # the flush counts apart
    assert sum(after[_spooled(r)] for r in SPOOL_REASONS) == EVENTS
    assert after["memq_agent_dropped_events_total"] == 0


async def test_publishes_too_few_replicas_confirmed_are_counted_as_not_replicated(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path / "redis").start()  # no replica: WAIT 1 never confirms
    settings = agent_settings(tmp_path / "data", server.url, publish_wait_replicas=1)
    try:
        async with running_agent(settings) as client:
            await _post_all(client)

            async def spooled() -> bool:
                now = await _samples(client)
                return now[_spooled("not_replicated")] + now[_spooled("behind_spool")] == EVENTS

            await eventually(spooled, timeout_s=15)
            now = await _samples(client)
    finally:
        server.stop()
    # WAIT's answer is read within the client's timeout: "too few replicas", not a timeout
    # taken for Redis being gone (every publish here was that before).
    assert now[_spooled("not_replicated")] >= 1
    assert now["memq_agent_published_events_total"] == 0
    assert now["memq_agent_spool_events"] == EVENTS


async def test_a_relayed_hook_is_counted_as_durable_then_flushed(tmp_path: Path) -> None:
    # The command hook's relay: answered once its events are on disk, then flushed.
    server = RedisServer(tmp_path / "redis").start()
    try:
        async with running_agent(agent_settings(tmp_path / "data", server.url)) as client:
            answer = await client.post(
                f"{HOOK_PATH}?{RELAY_QUERY}",
                content=payload("post_tool_use.json", session_id="m3"),
                headers={TARGET_HEADER: target(os.environ)},
            )
            assert answer.status_code == 200
            assert (await _samples(client))[_spooled("durable")] == 1  # on disk at the answer

            async def flushed() -> bool:
                return (await _samples(client))["memq_agent_flushed_events_total"] == 1

            await eventually(flushed)
            now = await _samples(client)
    finally:
        server.stop()
    assert now["memq_agent_published_events_total"] == 0  # it went through the spool
    assert now["memq_agent_spool_events"] == 0
