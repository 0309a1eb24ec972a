"""Chaos: three `memq worker` processes under kill -9, observer faults and a Redis restart.

For KILL_PHASE_S = 60 s, every 2 s, a random worker that has been working is killed with
SIGKILL and another started in its place (up to 30 kills), as the issue asks. Meanwhile 50
sessions x 40 tool calls are published at a steady rate over the same 60 s, so every kill
lands on a fleet with events arriving: the test counts the victims that had run a turn in
the last second and the events not yet processed at each kill, and asserts most kills hit
working workers with work queued. With MEMQ_JOB_TIMEOUT_S=6 a killed job is retaken after
~16 s (arq's in-progress key lives job timeout + 10 s), so the run takes ~80 s on a 2-CPU
machine. The fake observer answers 10 % of calls with a 500, 5 % with a 429 (retry-after
<= 1 s) and 2 % with garbage, and refuses ten calls in a row (a quota episode: HTTP 402 with
retry-after 2, which pauses the provider fleet-wide). Half-way through the kills the run also
stops its redis-server (AOF, fsync always) and starts it again a second later; a worker that
exits meanwhile is started again, as a supervisor would.

At the end: every published event is processed (stored or dropped) or dead-lettered, never
both; each stored event has exactly one observation; each session's calls reached the
observer in publish order and were committed in that order. The counts are printed.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import sqlite3
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from pipeline.events import ToolCall, encode_event
from pipeline.prompting.prompts import RECORDED_ELEMENT
from tests.support.fake_observer import FakeObserver, RecordedRequest, Reply, deterministic_reply
from tests.support.redis_server import RedisServer
from tests.support.worker_checks import wait_until
from tests.support.worker_harness import tool_call
from tests.support.worker_process import WorkerProcess, worker_env
from worker.keys import Keys
from worker.queue.scheduling import Scheduler, publish_args

SESSIONS = 50
EVENTS_PER_SESSION = 40
WORKERS = 3
KILL_EVERY_S = 2.0
KILL_PHASE_S = 60.0
# Publishing lasts as long as the kills, so every kill lands on a fleet with events arriving.
PUBLISH_S = KILL_PHASE_S
BUSY_WITHIN_S = 1.0  # a victim that logged a turn this recently was working when killed
QUOTA_EPISODE = range(80, 90)  # these observer calls (in arrival order) are refused: no quota
JOB_TIMEOUT_S = 6
REDIS_DOWN_S = 1.0
PREFIX = "chaos"
KEYS = Keys(PREFIX)
GARBAGE = [
    "Sure! I looked at the tool call and everything seems fine.",
    "<observation><type>discovery</type><title>cut off",
    "```\nno xml here\n```",
]
_SESSION_ID = re.compile(r"<memory_session_id>([^<]+)</memory_session_id>")
_STEP = re.compile(r"step (\d+) of (c\d+)")
_RECORDED = re.compile(rf"<{RECORDED_ELEMENT}>.*?</{RECORDED_ELEMENT}>", re.DOTALL)


class Faults:
    """The observer's responder: injected faults, otherwise the deterministic observer."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self.lock:
            roll, delay = self.rng.random(), self.rng.uniform(0, 0.03)
            retry_after = self.rng.choice(["0.2", "0.5", "1"])
            garbage = self.rng.choice(GARBAGE)
            call = self.calls
            self.calls += 1
        kind, reply = "ok", deterministic_reply(request)
        if call in QUOTA_EPISODE:
            kind, reply = "quota", Reply(
                status=402, error_type="billing_error", headers={"retry-after": "2"},
                error_message="Your credit balance is too low to access the API",
            )  # fmt: skip
        elif roll < 0.10:
            kind, reply = "500", Reply(status=500, error_message="upstream exploded")
        elif roll < 0.15:
            kind, reply = (
                "429",
                Reply(
                    status=429, error_type="rate_limit_error", headers={"retry-after": retry_after}
                ),
            )
        elif roll < 0.17:
            kind, reply = "garbage", Reply(text=garbage)
        with self.lock:
            self.counts[kind] += 1
        return Reply(**{**_fields(reply), "delay_s": delay})


def _fields(reply: Reply) -> dict[str, Any]:
    return {f: getattr(reply, f) for f in reply.__struct_fields__}


class Fleet:
    """WORKERS `memq worker` processes, killed and restarted like a supervisor would."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.started = 0
        self.kills = 0
        self.busy_kills = 0  # victims that had logged a turn within BUSY_WITHIN_S
        self.backlog_at_kills: list[int] = []  # events published and not yet processed
        self.exits: list[int] = []  # codes of workers that exited on their own
        self.workers = [self._start() for _ in range(WORKERS)]

    def _start(self) -> WorkerProcess:
        self.started += 1
        return WorkerProcess(self.env, self.log_dir / f"worker-{self.started:03d}.log")

    def working(self) -> list[int]:
        """Slots whose worker has run turns (it logs one line each): starting ones are spared."""
        return [
            slot
            for slot, worker in enumerate(self.workers)
            if worker.proc.poll() is None and worker.log_path.stat().st_size > 0
        ]

    def kill_one(self, rng: random.Random) -> bool:
        """SIGKILL a random working worker, and start another in its place (if one works)."""
        working = self.working()
        if not working:
            return False
        slot = rng.choice(working)
        victim = self.workers[slot]
        busy = time.time() - victim.log_path.stat().st_mtime <= BUSY_WITHIN_S
        victim.signal(signal.SIGKILL)
        self.busy_kills += busy
        victim.wait(10)
        victim.stop()
        self.kills += 1
        self.workers[slot] = self._start()
        return True

    def revive(self) -> None:
        """Start again any worker that exited by itself (e.g. when Redis went away)."""
        for slot, worker in enumerate(self.workers):
            if worker.proc.poll() is not None:
                self.exits.append(worker.proc.returncode)
                worker.stop()
                self.workers[slot] = self._start()

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


async def _publish_all(
    redis: aioredis.Redis, events: list[ToolCall], published: Counter[str]
) -> None:
    """Publish at a steady rate; while Redis is down, keep trying (the event id dedupes)."""
    scheduler = Scheduler(redis, KEYS)
    started = time.monotonic()
    for i, event in enumerate(events):
        due = started + PUBLISH_S * i / len(events)
        if (wait := due - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        while True:
            try:
                status, _ = await scheduler.publish(publish_args(
                    KEYS, event.memory_session_id, event.event_id, encode_event(event),
                    dedupe_ttl_s=3600, max_pending=100_000,
                ))  # fmt: skip
            except (RedisError, OSError):
                await asyncio.sleep(0.1)
                continue
            assert status in (0, 1)
            published["events"] += 1
            break


def _backlog(db: Path, published: Counter[str]) -> int:
    """Events published so far that no worker has processed yet."""
    try:
        (processed,) = _query(db, "SELECT count(*) FROM processed_events")[0]
    except sqlite3.OperationalError:  # not migrated yet
        processed = 0
    return published["events"] - int(processed)


async def _chaos(
    fleet: Fleet, server: RedisServer, db: Path, published: Counter[str], restart_redis: bool
) -> bool:
    """Kill a random running worker every KILL_EVERY_S; restart Redis once half-way if asked.

    Kills are due on a fixed schedule, so the time a kill or the restart takes does not push
    the later ones back (the phase still ends after KILL_PHASE_S).
    """
    rng = random.Random(7)
    started = time.monotonic()
    restarted = False
    for n in range(1, round(KILL_PHASE_S / KILL_EVERY_S) + 1):
        since = n * KILL_EVERY_S
        await asyncio.sleep(max(0.0, started + since - time.monotonic()))
        backlog = _backlog(db, published)
        if await asyncio.to_thread(fleet.kill_one, rng):
            fleet.backlog_at_kills.append(backlog)
        if restart_redis and not restarted and since >= KILL_PHASE_S / 2:
            await asyncio.to_thread(server.stop)
            await asyncio.sleep(REDIS_DOWN_S)
            await asyncio.to_thread(server.start)
            restarted = True
        fleet.revive()
    return restarted


def _query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        return conn.execute(sql).fetchall()


async def _settled(db: Path, redis: aioredis.Redis, total: int, fleet: Fleet) -> bool:
    fleet.revive()
    try:
        dead = await redis.xlen(KEYS.dead)
    except (RedisError, OSError):
        return False
    try:
        (processed,) = _query(db, "SELECT count(*) FROM processed_events")[0]
    except sqlite3.OperationalError:  # no database, or not migrated yet
        return False
    return int(processed) + int(dead) >= total


def _order_problems(requests: list[RecordedRequest]) -> list[str]:
    """Requests that skipped ahead of an event their session had not sent yet."""
    sent_up_to: dict[str, int] = defaultdict(lambda: -1)
    problems = []
    for request in requests:
        match = _SESSION_ID.search(request.system)
        if match is None:  # a body cut short by kill -9: it never reached the "model"
            continue
        session = match[1]
        # The tool calls this request shows, not the titles it lists as already recorded.
        calls = _RECORDED.sub("", request.user)
        steps = [int(n) for n, s in _STEP.findall(calls) if s == session]
        if not steps:
            continue
        if steps != list(range(steps[0], steps[0] + len(steps))):
            problems.append(f"{session}: one request out of order {steps}")
        if steps[0] > sent_up_to[session] + 1:
            problems.append(f"{session}: step {steps[0]} sent before {sent_up_to[session] + 1}")
        sent_up_to[session] = max(sent_up_to[session], steps[-1])
    return problems


@pytest.mark.slow
# ~80 s on a 2-CPU machine (60 s of kills, then ~16 s until the last killed job is
# retaken): the default 120 s leaves too little room on a loaded CI runner.
@pytest.mark.timeout(180)
async def test_kill_9_faults_and_a_redis_restart_lose_and_duplicate_nothing(
    tmp_path: Path,
    fake_observer: FakeObserver,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # One run takes both faults: the kills alone were a second 80 s run proving a subset.
    restart_redis = True
    data = tmp_path / "data"
    data.mkdir()
    db = data / "memq.db"
    sessions = [f"c{i:02d}" for i in range(SESSIONS)]
    events = [
        tool_call(s, n, tool_input={"command": f"step {n} of {s}"})
        for n in range(EVENTS_PER_SESSION)
        for s in sessions
    ]
    faults = Faults(seed=11)
    fake_observer.responder = faults
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    redis = aioredis.Redis.from_url(server.url)
    env = worker_env(data, server.url, fake_observer, prefix=PREFIX,
                     job_timeout_s=str(JOB_TIMEOUT_S), quota_pause_s="2", chroma="off")  # fmt: skip
    fleet: Fleet | None = None
    try:
        fleet = Fleet(env, tmp_path / "logs")
        running = fleet
        started = time.monotonic()
        published: Counter[str] = Counter()
        publishing = asyncio.create_task(_publish_all(redis, events, published))
        # Workers take seconds to start on a busy machine: the kills begin once one works.
        await wait_until(running.working, timeout_s=60, what="a worker running turns")
        restarted = await _chaos(fleet, server, db, published, restart_redis)
        await publishing
        await wait_until(
            lambda: _settled(db, redis, len(events), running),
            timeout_s=60,
            what="every published event processed or dead-lettered",
        )
        took = time.monotonic() - started
        fleet.stop()
        dead_ids, processed, dropped, stored = await _account(
            db, redis, {e.event_id for e in events}
        )
        outcomes = await redis.hgetall(KEYS.outcomes)
    finally:
        if fleet is not None:
            fleet.stop()
        await redis.aclose()
        server.stop()
    observed = _query(db, "SELECT id, memory_session_id, title FROM observations ORDER BY id")
    outcome_counts = {k.decode(): int(v) for k, v in outcomes.items()}
    with capsys.disabled():
        sys.stdout.write(
            f"\nchaos ({'workers killed, Redis restarted' if restarted else 'workers killed'}):"
            f" published {len(events)} = stored {len(stored)} + dropped {len(dropped)} + dead"
            f" {len(dead_ids)}; observations {len(observed)}; kills {fleet.kills} (victim"
            f" ran a turn within {BUSY_WITHIN_S:.0f} s: {fleet.busy_kills}; events not yet"
            f" processed at each kill: {fleet.backlog_at_kills}), worker"
            f" starts {fleet.started}, self-exits {fleet.exits}; observer calls"
            f" {dict(faults.counts)}; outcomes {outcome_counts}; {took:.1f} s\n"
        )
    assert restarted == restart_redis
    assert fleet.kills >= KILL_PHASE_S / KILL_EVERY_S / 2
    # The kills hit a loaded fleet: most victims were running turns, work was always queued.
    assert fleet.busy_kills >= fleet.kills / 2
    assert sum(n > 0 for n in fleet.backlog_at_kills) >= fleet.kills / 2
    # Nothing lost, nothing counted twice.
    assert processed | dead_ids == {e.event_id for e in events}
    assert not processed & dead_ids
    assert dropped <= processed
    assert dropped
    assert faults.counts["quota"] == len(QUOTA_EPISODE)
    assert outcome_counts["paused"] >= 1
    # One observation per stored event, none twice.
    titles = Counter((session, title) for _, session, title in observed)
    assert max(titles.values()) == 1
    assert len(observed) == len(stored)
    # Per-session order: as sent to the observer, and as committed.
    assert _order_problems(fake_observer.requests) == []
    committed: dict[str, list[int]] = defaultdict(list)
    for _, session, title in observed:
        step = _STEP.search(title)
        assert step is not None, title
        committed[session].append(int(step[1]))
    assert all(steps == sorted(steps) for steps in committed.values())


async def _account(
    db: Path, redis: aioredis.Redis, published: set[str]
) -> tuple[set[str], set[str], set[str], set[str]]:
    """(dead-lettered, processed, dropped, stored) event ids."""
    dead: set[str] = set()
    for _, fields in await redis.xrange(KEYS.dead):
        dead.add(json.loads(fields[b"event"])["event_id"])
    processed = {row[0] for row in _query(db, "SELECT event_id FROM processed_events")}
    dropped = {
        event_id
        for (raw,) in _query(db, "SELECT event_ids FROM dropped_outputs")
        for event_id in json.loads(raw)
    }
    assert processed <= published
    assert dead <= published
    return dead, processed, dropped, processed - dropped
