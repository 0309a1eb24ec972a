"""`memq telegram` against a server that is not the Bot API: a one-line error, never a crash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.fake_telegram import TOKEN, FakeTelegram
from tests.support.fake_telegram import fake_telegram_fixture as fake_telegram_fixture
from tests.support.ingest import REPO, console_script, subprocess_env
from worker.fanout.telegram.api import BotApiRequest


@pytest.mark.parametrize(
    "body", [b'{"status": "ok", "data": {}}', b'{"ok": true}', b"[1, 2]", b"<html>proxy</html>"]
)
def test_memq_telegram_on_a_reply_that_is_not_the_bot_apis_exits_with_one_line(
    tmp_path: Path, redis_url: str, fake_telegram: FakeTelegram, body: bytes
) -> None:
    fake_telegram.foreign_reply = body
    env = subprocess_env(
        tmp_path, redis_url, PYTHONPATH=str(REPO), MEMQ_TELEGRAM_TOKEN=TOKEN,
        MEMQ_TELEGRAM_API_URL=fake_telegram.url, MEMQ_TELEGRAM_CHAT_IDS="111",
    )  # fmt: skip
    done = subprocess.run(
        [console_script(), "telegram"], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "not the Bot API's" in line]
    assert len(errors) == 1, done.stderr
    assert "cannot reach the Telegram Bot API" in errors[0]
    assert "Traceback" not in done.stderr
    assert "KeyError" not in done.stderr
    assert TOKEN not in done.stdout + done.stderr


def test_bot_api_replies_pass_and_an_error_envelope_is_kept_for_ptb() -> None:
    assert BotApiRequest.parse_json_payload(b'{"ok": true, "result": 1}') == {
        "ok": True,
        "result": 1,
    }
    refused = b'{"ok": false, "error_code": 400, "description": "Bad Request"}'
    assert BotApiRequest.parse_json_payload(refused)["description"] == "Bad Request"
