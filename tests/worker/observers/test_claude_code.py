"""MEMQ_OBSERVER=claude-code: claude-agent-sdk's bundled Claude Code CLI, run for real against
the fake Anthropic server (ANTHROPIC_BASE_URL/ANTHROPIC_API_KEY), through a real worker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver, RecordedRequest, Reply, deterministic_reply
from tests.support.ingest import console_script, subprocess_env
from tests.support.worker_checks import observations, outcomes, stored_rows, wait_until
from tests.support.worker_harness import (
    drain,
    make_settings,
    publish,
    running_runtime,
    sqlite_store,
    tool_call,
)
from worker.keys import Keys
from worker.observers.claude_code import ClaudeCodeObserver
from worker.observers.claude_code_cli import auth_settings, bundled_cli
from worker.observers.claude_code_replies import quota_reset_s, usage_of
from worker.observers.errors import (
    ObserverAuthError,
    ObserverQuotaError,
    ObserverReplyTooLargeError,
    ObserverTransientError,
)
from worker.observers.protocol import ObserverRequest, Usage
from worker.ops.cost import CostReader
from worker.settings import Settings

pytestmark = pytest.mark.slow  # every test starts the real CLI (about half a second each)

REQUEST = ObserverRequest(system="You are memq's observer.", history=[], user="<calls/>")
QUOTA = "You've hit your limit · resets 5pm (Europe/London)"


@pytest.fixture(name="home")
def _fix_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own: the CLI never reads or writes the developer's ~/.claude."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _observer(home: Path, fake_url: str | None, **kw: object) -> ClaudeCodeObserver:
    environ = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    if fake_url is not None:
        environ |= {"ANTHROPIC_BASE_URL": fake_url, "ANTHROPIC_API_KEY": "test-key"}
    options: dict[str, object] = {"cli": bundled_cli(), "timeout_s": 20.0, "warm": 2} | kw
    return ClaudeCodeObserver(
        model="claude-haiku-4-5", data_dir=home / "data", max_tokens=512,
        environ=environ, **options,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture(name="settings")
def _fix_settings(
    tmp_path: Path, home: Path, redis_url: str, fake_observer: FakeObserver
) -> Settings:
    return make_settings(tmp_path / "data", redis_url, fake_observer.url, provider="claude-code")


async def _run(settings: Settings, arq_redis: ArqRedis, session: str, n: int = 2) -> None:
    await publish(arq_redis, settings, *(tool_call(session, i) for i in range(1, n + 1)))
    async with running_runtime(settings, arq_redis) as rt:
        await drain(rt, arq_redis)


async def test_an_observation_is_stored_through_claude_code(
    settings: Settings, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    await _run(settings, arq_redis, "cc-1")

    rows = await observations(settings, "cc-1")
    assert rows, "nothing stored"
    [sent, *_] = fake_observer.requests
    assert sent.body["stream"] is True  # the CLI streams; the fake answered with SSE
    assert sent.body["model"] == "test-model"
    assert "echo step 1" in sent.user
    # memq's system prompt, and no tools of Claude Code's own
    assert "cc-1" in sent.system
    assert not sent.body.get("tools")
    assert sent.body.get("thinking") in (None, {"type": "disabled"})  # never spends thinking
    counts = await outcomes(arq_redis, settings)
    assert counts.get("stored", 0) >= 1
    # the tokens and the cost the CLI reported reach the cost view
    store = sqlite_store(settings)
    try:
        cost = await CostReader(store).read()
    finally:
        await store.aclose()
    assert cost.calls >= 1
    assert cost.input_tokens > 0
    assert cost.reported_cost_usd is not None
    assert cost.reported_cost_usd > 0
    stats = await asyncio.to_thread(
        subprocess.run, [console_script(), "stats"], capture_output=True, text=True, timeout=60,
        env=subprocess_env(settings.data_path, settings.redis_url), check=False,
    )  # fmt: skip
    assert stats.returncode == 0, stats.stderr
    assert f"USD {cost.reported_cost_usd:.4f} as the observer reported it" in stats.stdout


async def _paused_then_stored(
    settings: Settings,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    first: Reply | Callable[[], Reply],
) -> tuple[bytes, float]:
    """Publish two calls, answer the first turn with `first`: returns the pause's reason and
    its TTL in seconds, and checks the batch was kept and then stored once the pause ended."""
    key = Keys(settings.prefix).pause("claude-code")
    if isinstance(first, Reply):
        fake_observer.script(first)
    else:  # made when the request comes: a reset counted from the reply, not the publish
        made = first
        answered: list[Reply] = []

        def respond(request: RecordedRequest) -> Reply:
            if answered:
                return deterministic_reply(request)
            answered.append(made())
            return answered[0]

        fake_observer.responder = respond
    await publish(arq_redis, settings, tool_call("cc-p", 1), tool_call("cc-p", 2))
    async with running_runtime(settings, arq_redis) as rt:
        worker = asyncio.create_task(drain(rt, arq_redis))
        try:
            await wait_until(lambda: arq_redis.exists(key), what="a pause")
            reason, ttl_ms = await arq_redis.get(key), await arq_redis.pttl(key)
            assert await stored_rows(settings) == []
        finally:
            await worker
    assert len(await observations(settings, "cc-p")) == 2
    assert (await outcomes(arq_redis, settings))["paused"] == 1
    return reason, ttl_ms / 1000


async def test_a_quota_reply_pauses_the_provider_fleet_wide_until_its_reset(
    settings: Settings, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    def quota() -> Reply:
        # The reset (whole epoch seconds) 2-3 s after the reply: time for the CLI to relay it
        # on a loaded machine, and the pause that the drain then waits out stays short.
        reset = int(time.time()) + 3
        line = f"Claude AI usage limit reached|{reset}"
        return Reply(status=429, error_type="rate_limit_error", error_message=line)

    reason, ttl_s = await _paused_then_stored(settings, arq_redis, fake_observer, quota)
    assert b"usage limit reached" in reason
    assert 0 < ttl_s <= 3.5  # the reset the CLI named, not MEMQ_QUOTA_PAUSE_S (300 s)


async def test_an_auth_failure_pauses_with_the_login_hint(
    settings: Settings, arq_redis: ArqRedis, fake_observer: FakeObserver
) -> None:
    settings = msgspec.structs.replace(settings, quota_pause_s=1.0)
    first = Reply(status=401, error_type="authentication_error", error_message="invalid x-api-key")
    reason, ttl_s = await _paused_then_stored(settings, arq_redis, fake_observer, first)
    assert b"run `claude` and log in" in reason
    assert b"\n" not in reason
    assert ttl_s <= 1.0


async def test_not_logged_in_is_an_auth_error_telling_the_user_to_log_in(home: Path) -> None:
    observer = _observer(home, None)  # no key, no login in this HOME
    try:
        with pytest.raises(ObserverAuthError) as caught:
            await observer.complete(REQUEST)
    finally:
        await observer.aclose()
    message = str(caught.value)
    assert "Not logged in" in message
    assert "run `claude` and log in" in message
    assert "\n" not in message


async def test_a_cli_that_does_not_answer_in_time_is_a_retryable_timeout(
    home: Path, fake_observer: FakeObserver
) -> None:
    # The timeout covers a fresh CLI's start too (the second call): 5 s leaves a loaded
    # machine room for that. The stuck reply is held until the call has timed out (a fixed
    # 10 s delay also kept the stuck CLI, stopped in the background, alive until then, and
    # the observer's close waited for it).
    fake_observer.hold()
    fake_observer.script(Reply(text="<observation/>"))
    observer = _observer(home, fake_observer.url, timeout_s=5.0)
    try:
        with pytest.raises(ObserverTransientError, match=r"no reply within 5s"):
            await observer.complete(REQUEST)
        # the stuck process is gone; the next call starts a fresh one and succeeds
        fake_observer.reset()  # the held reply goes to the stopped CLI
        fake_observer.script(Reply(text="<observation>later</observation>"))
        reply = await observer.complete(REQUEST)
    finally:
        await observer.aclose()
    assert reply.text == "<observation>later</observation>"


async def test_a_missing_cli_is_a_retryable_failure_naming_the_setting(home: Path) -> None:
    observer = _observer(home, "http://127.0.0.1:1", cli=str(home / "no-such-claude"))
    with pytest.raises(ObserverTransientError, match="MEMQ_CLAUDE_CODE_CLI"):
        await observer.complete(REQUEST)
    await observer.aclose()


async def test_a_crashing_cli_is_a_retryable_failure_with_its_stderr(home: Path) -> None:
    crash = home / "claude"
    crash.write_text("#!/bin/sh\necho 'segfault in the fake CLI' >&2\nexit 3\n")
    crash.chmod(crash.stat().st_mode | stat.S_IXUSR)
    observer = _observer(home, "http://127.0.0.1:1", cli=str(crash))
    with pytest.raises(ObserverTransientError, match="Claude Code CLI failed") as caught:
        await observer.complete(REQUEST)
    await observer.aclose()
    assert "\n" not in str(caught.value)
    assert "segfault in the fake CLI" in str(caught.value)  # its stderr, on the same line


async def test_warm_turns_reuse_one_process_and_each_turn_starts_empty(
    home: Path, fake_observer: FakeObserver
) -> None:
    observer = _observer(home, fake_observer.url)
    try:
        for n in range(3):
            fake_observer.script(Reply(text=f"<observation>{n}</observation>"))
            reply = await observer.complete(
                ObserverRequest(system="sys", history=[], user=f"turn {n}")
            )
            assert reply.text == f"<observation>{n}</observation>"
    finally:
        await observer.aclose()
    sent = fake_observer.requests
    assert len(sent) == 3
    # `/clear` between turns: every request holds one user message, never the earlier turns
    for n, request in enumerate(sent):
        assert [m["role"] for m in request.messages] == ["user"]
        assert f"turn {n}" in request.user
        assert all(f"turn {k}" not in request.user for k in range(n))


async def test_tokens_and_cost_the_cli_reports_go_into_usage(
    home: Path, fake_observer: FakeObserver
) -> None:
    fake_observer.script(
        Reply(text="<observation/>", input_tokens=1000, cached_input_tokens=400, output_tokens=50)
    )
    observer = _observer(home, fake_observer.url, warm=0)
    try:
        reply = await observer.complete(REQUEST)
    finally:
        await observer.aclose()
    assert (reply.usage.input_tokens, reply.usage.cached_input_tokens) == (1000, 400)
    assert reply.usage.output_tokens == 50
    assert reply.usage.cost_usd is not None
    assert reply.usage.cost_usd > 0
    assert reply.provider == "claude-code"


def test_usage_counts_cache_reads_and_writes_as_input() -> None:
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 5,
             "cache_read_input_tokens": 100, "output_tokens": 7}  # fmt: skip
    assert usage_of(usage, 0.01) == Usage(
        input_tokens=115, cached_input_tokens=100, output_tokens=7, cost_usd=0.01
    )
    assert usage_of(None, None) == Usage()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Claude AI usage limit reached|1796205600", 3600.0),
        ("You've hit your limit · resets 5pm (UTC)", 8 * 3600.0),
        ("5-hour limit reached ∙ resets 9:30am", 1800.0),
        ("You've hit your limit · resets 5pm (Europe/London)", 8 * 3600.0),
        ("weekly limit reached", None),
    ],
)
def test_quota_reset_times_in_the_cli_line(text: str, seconds: float | None) -> None:
    now = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # London is on GMT in December
    assert quota_reset_s(text, now) == seconds


async def test_a_quota_error_carries_the_reset(home: Path, fake_observer: FakeObserver) -> None:
    fake_observer.script(Reply(status=429, error_type="rate_limit_error", error_message=QUOTA))
    observer = _observer(home, fake_observer.url)
    try:
        with pytest.raises(ObserverQuotaError) as caught:
            await observer.complete(REQUEST)
    finally:
        await observer.aclose()
    assert caught.value.reset_after_s is not None
    assert caught.value.reset_after_s > 0


def test_only_the_authentication_part_of_the_user_settings_is_passed_on(home: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "apiKeyHelper": "get-key",
                "env": {"ANTHROPIC_BASE_URL": "https://gw.example", "CLAUDE_CODE_USE_BEDROCK": "1",
                        "MY_TOOL_FLAG": "x"},
                "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "memq hook"}]}]},
                "enabledPlugins": {"p@m": True},
                "permissions": {"allow": ["Bash"]},
            }
        )
    )  # fmt: skip
    passed = auth_settings(home)
    assert passed is not None
    assert json.loads(passed) == {
        "apiKeyHelper": "get-key",
        "env": {"ANTHROPIC_BASE_URL": "https://gw.example", "CLAUDE_CODE_USE_BEDROCK": "1"},
    }
    (home / ".claude" / "settings.json").write_text('{"hooks": {}}')
    assert auth_settings(home) is None


async def test_a_cli_killed_mid_turn_is_a_retryable_failure_not_an_empty_reply(
    home: Path, fake_observer: FakeObserver
) -> None:
    observer = _observer(home, fake_observer.url)
    fake_observer.hold()
    call = asyncio.create_task(observer.complete(REQUEST))
    try:
        await asyncio.to_thread(fake_observer.wait_for_requests, 1, 30.0)
        [cli] = _children_named("claude")
        os.kill(cli, signal.SIGKILL)  # the CLI process this test's observer started
        with pytest.raises(ObserverTransientError, match="Claude Code CLI failed"):
            await call
    finally:
        fake_observer.release()
        await observer.aclose()


def _children_named(name: str) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            command, rest = stat_file.read_text().split(")", 1)
        except OSError:
            continue
        if rest.split()[1] == str(os.getpid()) and command.endswith(f"({name}"):
            found.append(int(stat_file.parent.name))
    return found


async def test_a_reply_past_the_byte_cap_is_too_large_not_a_retry(
    home: Path, fake_observer: FakeObserver
) -> None:
    # Retrying an oversize reply would pay for it again each time: it is permanent, as over HTTP.
    huge = "<observation><narrative>" + "x" * 300_000 + "</narrative></observation>"
    fake_observer.script(Reply(text=huge), Reply(text="<observation>ok</observation>"))
    observer = _observer(home, fake_observer.url, max_reply_bytes=64 * 1024)
    try:
        with pytest.raises(ObserverReplyTooLargeError, match=r"reply over 65536 bytes") as caught:
            await observer.complete(REQUEST)
        assert 0 < len(caught.value.head.encode()) <= 64 * 1024
        assert caught.value.head.startswith("<observation><narrative>xxx")
        # The process that read it is not reused; the next call is answered as before.
        assert (await observer.complete(REQUEST)).text == "<observation>ok</observation>"
    finally:
        await observer.aclose()
