"""A credential in an observer base URL never reaches a dead letter, a log line or stderr."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from arq.connections import ArqRedis

from tests.support.fake_observer import FakeObserver, Reply
from tests.support.ports import free_port
from tests.support.worker_checks import dead_letters
from tests.support.worker_harness import drain, publish, running_runtime, tool_call
from worker.logs import configure_logging
from worker.settings import load_settings

PLANTED = "PlantedKey-7Qx9"


@pytest.mark.parametrize("failure", ["unreachable", "not-a-completion"])
async def test_a_key_in_the_base_url_is_masked_in_dead_letters_and_logs(
    tmp_path: Path,
    redis_url: str,
    arq_redis: ArqRedis,
    fake_observer: FakeObserver,
    capsys: pytest.CaptureFixture[str],
    failure: str,
) -> None:
    if failure == "unreachable":
        base = f"http://127.0.0.1:{free_port()}/v1"
    else:  # something answers, but not the API (the SDK puts the query before its path)
        base = fake_observer.url + "/v1"
        fake_observer.script(Reply(status=200, body="<html>proxy</html>"))
    settings = load_settings(
        {**_environ(tmp_path, redis_url), "OPENAI_BASE_URL": f"{base}?api-key={PLANTED}"}
    )
    await publish(arq_redis, settings, tool_call("s1", 1))
    with memq_logging():  # as `memq worker` configures it: JSON lines on stderr
        async with running_runtime(settings, arq_redis) as rt:
            await drain(rt, arq_redis)
    logged = capsys.readouterr().err
    assert '"turn dead"' in logged  # the turn's own line is there, its reason masked
    (dead,) = await dead_letters(arq_redis, settings)
    if failure == "unreachable":  # the reason names the URL, masked
        assert "api-key=***" in dead["reason"], dead["reason"]
    for text in [*dead.values(), logged]:
        assert PLANTED not in text


@contextmanager
def memq_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    quiet = {name: logging.getLogger(name).level for name in ("httpx", "httpx2")}
    configure_logging("json")
    try:
        yield
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        for name, level in quiet.items():
            logging.getLogger(name).setLevel(level)


def _environ(tmp_path: Path, redis_url: str) -> dict[str, str]:
    return {
        "MEMQ_DATA_DIR": str(tmp_path),
        "MEMQ_REDIS_URL": redis_url,
        "MEMQ_OBSERVER": "openai",
        "MEMQ_MODEL": "test-model",
        "MEMQ_BATCH_WAIT_MS": "0",
        "MEMQ_BATCH_MAX_WAIT_S": "0",
        "MEMQ_RETRY_BASE_S": "0.05",
        "MEMQ_RETRY_MAX_S": "0.2",
        "MEMQ_MAX_ATTEMPTS": "1",
        "MEMQ_OBSERVER_TIMEOUT_S": "5",
        "OPENAI_API_KEY": "test-key",
    }
