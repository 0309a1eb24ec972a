"""`memq worker --metrics-port`: Prometheus metrics, /healthz and /readyz against real Redis."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import redis.asyncio as aioredis
from arq.connections import ArqRedis
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from pipeline.events import encode_event
from pipeline.outcomes import COUNTED as COUNTED_NAMES
from pipeline.outcomes import Outcome, TurnResult
from pipeline.prompting.conversation import Exchange, ObserverState
from tests.support.fake_observer import FakeObserver
from tests.support.ingest import closed_port_url, subprocess_env
from tests.support.metric_samples import metric_samples, metric_value
from tests.support.ports import free_port, wait_for_port
from tests.support.redis_server import RedisServer
from tests.support.worker_harness import drain, make_settings, prompt, publish, tool_call
from tests.support.worker_process import WorkerProcess
from worker.http_serving import ListenError
from worker.keys import Keys
from worker.limits.pauses import Pauses
from worker.ops.health import HealthServer
from worker.ops.silence import silent_sessions
from worker.sessions.jobs import build_runtime, close_runtime
from worker.settings import Settings, load_settings
from worker.storage.records import BatchWrite, ObservationRow
from worker.storage.sqlite.store import SqliteStore
from worker.telemetry.counters import Counters
from worker.telemetry.metrics import Metrics


def _settings(tmp_path: Path, redis_url: str) -> Settings:
    return load_settings({"MEMQ_DATA_DIR": str(tmp_path), "MEMQ_REDIS_URL": redis_url})


async def _get(url: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.read().decode()

    return await asyncio.to_thread(fetch)


async def _raw(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    reply = await reader.read()
    writer.close()
    await writer.wait_closed()
    return reply


HealthFactory = Callable[[aioredis.Redis, SqliteStore, Metrics], AbstractAsyncContextManager[str]]


@pytest.fixture(name="health")
def _fix_health(tmp_path: Path, redis_url: str) -> HealthFactory:
    """Start a HealthServer on a free loopback port; yields its base URL."""

    @asynccontextmanager
    async def start(
        redis: aioredis.Redis, store: SqliteStore, metrics: Metrics
    ) -> AsyncIterator[str]:
        server = HealthServer(_settings(tmp_path, redis_url), redis, store, metrics)
        url = await server.start("127.0.0.1", 0)
        try:
            yield url
        finally:
            await server.aclose()
            await store.aclose()

    return start


def _observation(session: str, title: str, at: datetime) -> ObservationRow:
    return ObservationRow(
        memory_session_id=session, project="demo", type="discovery", title=title,
        subtitle=None, facts=[], narrative=f"{title} happened", concepts=[], files_read=[],
        files_modified=[], prompt_number=None, content_hash=f"hash-{session}-{title}",
        created_at=at,
    )  # fmt: skip


STORED, DROPPED, PAUSED, RETRY, DEAD, SKIPPED = (
    Outcome.STORED, Outcome.DROPPED, Outcome.PAUSED, Outcome.RETRY, Outcome.DEAD, Outcome.SKIPPED
)  # fmt: skip
COUNTED = [
    pytest.param(
        [(TurnResult(outcome=STORED, stored=3, deduplicated=2), 1)], id="stored-and-dedup"
    ),
    pytest.param(
        [
            (TurnResult(outcome=DROPPED, category="prose"), 1),
            (TurnResult(outcome=DROPPED, category="prose"), 1),
            (TurnResult(outcome=DROPPED, category="malformed_xml"), 1),
        ],
        id="dropped-by-category",
    ),
    pytest.param(
        [
            (TurnResult(outcome=PAUSED), 1),
            (TurnResult(outcome=RETRY), 1),
            (TurnResult(outcome=RETRY), 1),
            (TurnResult(outcome=DEAD), 4),  # one per dead-lettered entry
        ],
        id="paused-retry-dead",
    ),
    pytest.param(
        [
            (TurnResult(outcome=SKIPPED), 1),
            (TurnResult(outcome=STORED), 1),  # nothing new stored
            (TurnResult(outcome=Outcome.RECORDED), 1),  # bookkeeping is no outcome
        ],
        id="zero-counts-nothing",
    ),
]


@pytest.mark.parametrize("counted", COUNTED)
async def test_metrics_show_every_outcome_counted_in_redis(
    tmp_path: Path,
    redis: aioredis.Redis,
    health: HealthFactory,
    counted: list[tuple[TurnResult, int]],
) -> None:
    metrics = Metrics()
    counters = Counters(redis, Keys("memq"), metrics)
    for result, n in counted:
        await counters.count(result, n)
    pipe = redis.pipeline(transaction=False)
    counters.queue_tokens(pipe, 120, 100, 30)
    counters.queue_tokens(pipe, 7, 0, 5)
    await pipe.execute()
    async with health(redis, SqliteStore(tmp_path / "memq.db"), metrics) as url:
        status, text = await _get(f"{url}/metrics")
    assert status == 200
    samples = metric_samples(text)
    in_redis = await counters.outcomes()
    for outcome in COUNTED_NAMES:
        series = {
            labels: v
            for (name, labels), v in samples.items()
            if name == "memq_outcomes_total" and dict(labels)["outcome"] == outcome
        }
        assert sum(series.values()) == in_redis[outcome]
        for labels, value in series.items():
            category = dict(labels)["category"]
            if category:
                assert value == in_redis[f"{outcome}:{category}"]
    assert metric_value(samples, "memq_dedupe_hits_total") == in_redis["deduplicated"]
    tokens = await counters.tokens()
    for kind in ("input", "cached_input", "output"):
        assert metric_value(samples, "memq_tokens_total", kind=kind) == tokens[kind]


async def test_metrics_gauges_read_streams_pauses_dead_letters_and_vector_lag(
    tmp_path: Path, redis_url: str, arq_redis: ArqRedis, health: HealthFactory
) -> None:
    settings = _settings(tmp_path, redis_url)
    keys = Keys(settings.prefix)
    await publish(arq_redis, settings, tool_call("s1", 1), tool_call("s1", 2), tool_call("s2", 1))
    await asyncio.sleep(0.5)  # the oldest entry's age is then at least that: a 0 is wrong
    await arq_redis.xadd(keys.dead, {"reason": "bad entry"})
    await Pauses(arq_redis, keys).pause("openai", 60, "quota")
    store = SqliteStore(settings.data_path / "memq.db")
    now = datetime.now(UTC)
    await store.write_batch(
        BatchWrite(
            memory_session_id="s9", project="demo", fence=1, event_ids=["e1"],
            observations=[_observation("s9", "one", now), _observation("s9", "two", now)],
        )
    )  # fmt: skip
    async with health(arq_redis, store, Metrics()) as url:
        status, text = await _get(f"{url}/metrics")
    assert status == 200
    samples = metric_samples(text)
    assert metric_value(samples, "memq_stream_pending") == 3
    assert 0.5 <= metric_value(samples, "memq_stream_oldest_pending_seconds") < 60
    assert metric_value(samples, "memq_paused_providers", provider="openai") == 1
    assert metric_value(samples, "memq_paused_providers", provider="anthropic") == 0
    assert metric_value(samples, "memq_dead_letters") == 1
    assert metric_value(samples, "memq_vector_lag") == 2
    assert metric_value(samples, "memq_silent_sessions") == 0


READINESS = [
    pytest.param(True, True, 200, "ready", id="both-reachable"),
    pytest.param(False, True, 503, "redis unreachable: ", id="redis-down"),
    pytest.param(True, False, 503, "store unreachable: ", id="store-broken"),
]


@pytest.mark.parametrize(("redis_ok", "store_ok", "status", "body"), READINESS)
async def test_readyz_names_what_is_unreachable(
    tmp_path: Path,
    redis_url: str,
    health: HealthFactory,
    redis_ok: bool,
    store_ok: bool,
    status: int,
    body: str,
) -> None:
    client = aioredis.Redis.from_url(redis_url if redis_ok else closed_port_url())
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the database directory should be")
    path = tmp_path / "memq.db" if store_ok else blocker / "memq.db"
    try:
        async with health(client, SqliteStore(path), Metrics()) as url:
            got_status, got_body = await _get(f"{url}/readyz")
            healthz = await _get(f"{url}/healthz")
    finally:
        await client.aclose()
    assert got_status == status
    assert got_body.startswith(body)
    assert got_body.count("\n") == 1  # one line
    assert healthz == (200, "ok\n")


async def test_readyz_turns_503_while_redis_is_stopped_and_the_server_keeps_answering(
    tmp_path: Path, health: HealthFactory
) -> None:
    server = RedisServer(tmp_path / "own-redis").start()
    client = aioredis.Redis.from_url(server.url)
    metrics = Metrics()
    await Counters(client, Keys("memq"), metrics).count(TurnResult(outcome=STORED, stored=2))
    try:
        async with health(client, SqliteStore(tmp_path / "memq.db"), metrics) as url:
            assert await _get(f"{url}/readyz") == (200, "ready\n")
            server.stop()
            status, reason = await _get(f"{url}/readyz")
            assert status == 503
            assert reason.startswith("redis unreachable: ")
            assert await _get(f"{url}/healthz") == (200, "ok\n")
            status, text = await _get(f"{url}/metrics")
            assert status == 200
            assert (
                metric_value(
                    metric_samples(text), "memq_outcomes_total", outcome="stored", category=""
                )
                == 2
            )
            server.start()
            deadline = time.monotonic() + 10
            while (await _get(f"{url}/readyz"))[0] != 200:
                assert time.monotonic() < deadline, "readyz stayed 503 after Redis came back"
                await asyncio.sleep(0.1)
    finally:
        await client.aclose()
        server.stop()


# HTTP/1.1 keeps a connection open unless the client asks otherwise: these ask, to read to EOF.
HTTP = [
    pytest.param(b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 b"HTTP/1.1 404 ", b"not found: try /metrics, /healthz or /readyz\n",
                 id="unknown-path"),
    pytest.param(b"POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 b"HTTP/1.1 405 ", b"only GET and HEAD\n", id="post"),
    pytest.param(b"\x16\x03\x01 not http\r\n\r\n", b"HTTP/1.1 400 ", None, id="garbage"),
    pytest.param(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 b"HTTP/1.1 200 ", b"", id="head"),
    pytest.param(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 b"HTTP/1.1 200 ", b"", id="head-metrics"),
    pytest.param(b"GET /healthz?probe=1 HTTP/1.0\r\n\r\n", b"HTTP/1.1 200 ", b"ok\n",
                 id="query-string"),
]  # fmt: skip


@pytest.mark.parametrize(("request_bytes", "status_line", "body"), HTTP)
async def test_odd_requests_get_an_answer_and_the_server_keeps_serving(
    tmp_path: Path,
    redis: aioredis.Redis,
    health: HealthFactory,
    request_bytes: bytes,
    status_line: bytes,
    body: bytes | None,
) -> None:
    async with health(redis, SqliteStore(tmp_path / "memq.db"), Metrics()) as url:
        reply = await asyncio.wait_for(_raw(url, request_bytes), 3)
        assert reply.startswith(status_line)
        if body is not None:  # HEAD: headers only
            assert reply.endswith(b"\r\n\r\n" + body)
        assert await _get(f"{url}/healthz") == (200, "ok\n")


class _Broken(Collector):
    """A collector that fails as a bug in one would: the scrape fails, the probes stay up."""

    def collect(self) -> Iterable[Metric]:
        raise RuntimeError("collector bug")


async def test_a_failing_scrape_is_a_500_line_and_the_probes_keep_answering(
    tmp_path: Path, redis: aioredis.Redis, health: HealthFactory
) -> None:
    metrics = Metrics()
    metrics.registry.register(_Broken())
    async with health(redis, SqliteStore(tmp_path / "memq.db"), metrics) as url:
        assert await _get(f"{url}/metrics") == (500, "internal error (see the worker log)\n")
        assert await _get(f"{url}/healthz") == (200, "ok\n")
        assert await _get(f"{url}/readyz") == (200, "ready\n")


async def test_a_metrics_port_in_use_is_one_line_naming_it(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    store = SqliteStore(tmp_path / "memq.db")
    server = HealthServer(_settings(tmp_path, "redis://127.0.0.1:9"), redis, store, Metrics())
    try:
        with pytest.raises(ListenError, match=f"^cannot serve metrics on 127.0.0.1:{port}: "):
            await server.start("127.0.0.1", port)
    finally:
        taken.close()
        await server.aclose()
        await store.aclose()


async def test_a_real_worker_run_feeds_events_batches_latency_tokens_and_dedupe(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    health: HealthFactory,
) -> None:
    settings = make_settings(tmp_path, redis_url, fake_observer.url)
    same = {"tool_input": {"command": "ls"}, "output": "x"}
    await publish(arq_redis, settings, tool_call("s1", 1), tool_call("s1", 2), tool_call("s1", 3))
    await publish(arq_redis, settings, tool_call("s2", 1, **same), tool_call("s2", 2, **same))
    await publish(arq_redis, settings, prompt("s3", 1, "only a question"))  # no observer turn
    metrics = Metrics()
    rt = await build_runtime(settings, arq_redis, metrics)
    try:
        await drain(rt, arq_redis)
    finally:
        await close_runtime(rt)
    async with health(arq_redis, SqliteStore(settings.data_path / "memq.db"), metrics) as url:
        _, text = await _get(f"{url}/metrics")
    samples = metric_samples(text)
    in_redis = await rt.counters.outcomes()
    assert in_redis["deduplicated"] == 1  # s2's two identical calls
    assert metric_value(samples, "memq_events_total") == 6
    assert metric_value(samples, "memq_batch_size_sum") == 5
    assert metric_value(samples, "memq_batch_size_count") == 2  # one observer turn per session
    calls = len(fake_observer.requests)
    assert metric_value(samples, "memq_observer_latency_seconds_count") == calls
    assert (
        metric_value(samples, "memq_outcomes_total", outcome="stored", category="")
        == in_redis["stored"]
    )
    assert metric_value(samples, "memq_dedupe_hits_total") == in_redis["deduplicated"]
    tokens = await rt.counters.tokens()
    assert tokens["input"] > 0
    assert metric_value(samples, "memq_tokens_total", kind="input") == tokens["input"]
    assert metric_value(samples, "memq_stream_pending") == 0


TURNS = [
    pytest.param(TurnResult(outcome=STORED), 3, 3, 1, id="stored"),
    pytest.param(TurnResult(outcome=DROPPED, category="prose"), 2, 2, 1, id="dropped"),
    pytest.param(TurnResult(outcome=DEAD), 4, 4, 1, id="dead"),
    pytest.param(TurnResult(outcome=Outcome.RECORDED), 2, 2, 0, id="recorded-has-no-batch"),
    pytest.param(TurnResult(outcome=PAUSED), 4, 0, 0, id="paused-comes-back-later"),
    pytest.param(TurnResult(outcome=RETRY), 1, 0, 0, id="retry-comes-back-later"),
    pytest.param(TurnResult(outcome=Outcome.THROTTLED), 1, 0, 0, id="throttled-comes-back-later"),
]


@pytest.mark.parametrize(("result", "events", "counted", "batches"), TURNS)
def test_finished_turns_count_their_events_and_observer_batches(
    result: TurnResult, events: int, counted: int, batches: int
) -> None:
    metrics = Metrics()
    metrics.finish_turn(result, events)
    samples = metric_samples(metrics.render().decode())
    assert metric_value(samples, "memq_events_total") == counted
    assert metric_value(samples, "memq_batch_size_count") == batches


@pytest.mark.slow
async def test_memq_worker_with_metrics_port_answers_probes_and_stops_on_sigterm(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    port = free_port()
    env = subprocess_env(
        tmp_path, redis_url, ANTHROPIC_API_KEY="x", ANTHROPIC_BASE_URL="http://127.0.0.1:9",
        MEMQ_MODEL="test", MEMQ_CHROMA="off",
    )  # fmt: skip
    worker = WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", str(port))
    try:
        await asyncio.to_thread(wait_for_port, port, 30)
        url = f"http://127.0.0.1:{port}"
        assert await _get(f"{url}/healthz") == (200, "ok\n")
        assert await _get(f"{url}/readyz") == (200, "ready\n")
        status, text = await _get(f"{url}/metrics")
        assert status == 200
        assert ("memq_outcomes_total", (("category", ""), ("outcome", "stored"))) in metric_samples(
            text
        )
        worker.signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait, 40) == 0
        assert f"metrics and health on http://127.0.0.1:{port}/metrics" in worker.log()
    finally:
        worker.stop()


# Silent sessions: times are seconds before NOW; the threshold is one hour.
NOW = 1_900_000_000.0
HOUR = 3600.0


class Silence(msgspec.Struct, frozen=True, kw_only=True):
    """One session as the store and Redis see it."""

    activity: list[float] = []  # batches the store recorded, seconds ago
    observed: list[float] = []  # of those, the ones that stored an observation
    history: bool = False  # the observer has answered the session's tool calls
    pending: list[tuple[float, str]] = []  # (seconds ago, kind) still in the stream


SILENCE = [
    pytest.param(Silence(activity=[7200, 600], history=True), 1, id="tool-calls-2h-nothing-stored"),
    pytest.param(
        Silence(activity=[7200, 1200, 600], observed=[1200], history=True),
        0,
        id="observation-20min-ago",
    ),
    pytest.param(Silence(activity=[7200, 600]), 0, id="prompts-only"),
    pytest.param(Silence(activity=[14400, 7300], history=True), 0, id="went-quiet-long-ago"),
    pytest.param(Silence(activity=[1800, 60], history=True), 0, id="busy-only-30min"),
    pytest.param(Silence(pending=[(7200, "tool_call")]), 1, id="tool-call-waiting-2h"),
    pytest.param(Silence(pending=[(600, "tool_call")]), 0, id="tool-call-waiting-10min"),
    pytest.param(Silence(pending=[(7200, "prompt")]), 0, id="prompt-waiting-2h"),
    pytest.param(
        Silence(activity=[9000], observed=[9000], pending=[(7200, "tool_call")]),
        1,
        id="waiting-since-after-the-last-observation",
    ),
    pytest.param(
        Silence(activity=[7200, 600], history=True, pending=[(7000, "tool_call")]),
        1,
        id="silent-both-ways-counts-once",
    ),
]


async def _make_session(
    redis: aioredis.Redis, store: SqliteStore, keys: Keys, session: str, case: Silence
) -> None:
    for n, ago in enumerate(sorted(case.activity, reverse=True)):
        at = datetime.fromtimestamp(NOW - ago, UTC)
        observations = [_observation(session, f"row {n}", at)] if ago in case.observed else []
        await store.write_batch(
            BatchWrite(
                memory_session_id=session, project="demo", fence=1,
                event_ids=[f"{session}-{n}"], observations=observations, occurred_at=at,
            )
        )  # fmt: skip
    if case.history:
        state = ObserverState(system="init", history=[Exchange(user="calls", assistant="<skip/>")])
        await redis.set(keys.observer(session), msgspec.json.encode(state))
    for n, (ago, kind) in enumerate(sorted(case.pending, reverse=True)):
        event = tool_call(session, n) if kind == "tool_call" else prompt(session, n, "do it")
        entry_id = f"{int((NOW - ago) * 1000)}-{n}"
        await redis.xadd(keys.events(session), {"event": encode_event(event)}, id=entry_id)
        await redis.sadd(keys.sessions, session)


@pytest.mark.parametrize(("case", "silent"), SILENCE)
async def test_silent_sessions_counts_tool_calls_left_without_an_observation(
    tmp_path: Path, redis: aioredis.Redis, case: Silence, silent: int
) -> None:
    keys = Keys("memq")
    store = SqliteStore(tmp_path / "memq.db")
    try:
        await _make_session(redis, store, keys, "s1", case)
        got = await silent_sessions(redis, keys, store, threshold_s=HOUR, now_s=NOW)
    finally:
        await store.aclose()
    assert got == silent


async def test_silent_sessions_add_up_across_sessions(
    tmp_path: Path, redis: aioredis.Redis
) -> None:
    keys = Keys("memq")
    store = SqliteStore(tmp_path / "memq.db")
    cases = [case.values[0] for case in SILENCE]
    try:
        for n, case in enumerate(cases):
            assert isinstance(case, Silence)
            await _make_session(redis, store, keys, f"s{n}", case)
        got = await silent_sessions(redis, keys, store, threshold_s=HOUR, now_s=NOW)
    finally:
        await store.aclose()
    assert got == sum(int(str(case.values[1])) for case in SILENCE)


def test_every_number_of_the_fleet_figures_has_its_gauge() -> None:
    from worker.telemetry.metrics import _FLEET_GAUGES, FleetFigures

    labelled = {"paused_providers"}  # one series per provider, set apart
    assert set(_FLEET_GAUGES) == set(FleetFigures.__struct_fields__) - labelled
