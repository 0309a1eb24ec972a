"""A giant field's windows: a secret cut in two by a window's edge never ships, even when
redaction alone brings the event under the cap (no second cut then hides the edge)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from pipeline.events import ToolCall
from pipeline.prompting.framing import render_tool_field
from pipeline.prompting.truncate import TAIL_RATIO
from worker.ingest.prepare import _MARGIN, prepare_encoded

MAX_BYTES = 1_048_576
_WINDOW = int(MAX_BYTES / 0.9) + int(_MARGIN / TAIL_RATIO)  # as prepare_encoded narrows
# Lines that redaction shortens by nearly half, so the redacted window fits the cap.
_LINE = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5\n"
_KEY_BODY = [
    f"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC{i:04d}Kx8mQ2pL7vRt3Yw9Zn4Bc6Hs1Jd5" for i in range(40)
]
_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(_KEY_BODY) + "\n-----END RSA PRIVATE KEY-----\n"
)
_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ." + "Sfl" * 30


def _event(output: str) -> ToolCall:
    return ToolCall(
        event_id="e1",
        memory_session_id="s1",
        project="p",
        occurred_at=datetime(2025, 1, 1, tzinfo=UTC),
        tool_name="Bash",
        tool_input="cat big.log",
        tool_output=output,
    )


def _straddling(secret: str, edge: str) -> str:
    """Filler with `secret` placed so the window's tail (or head) edge falls inside it."""
    size = 2 * _WINDOW
    lines = _LINE * (size // len(_LINE))
    if edge == "tail":
        at = len(lines) - math.floor(_WINDOW * TAIL_RATIO) - len(secret) // 2
    else:
        at = math.floor(_WINDOW * 0.6) - len(secret) // 2
    text = lines[:at] + secret + lines[at:]
    assert len(render_tool_field(text)) == len(text)
    return text


@pytest.mark.parametrize("edge", ["head", "tail"])
@pytest.mark.parametrize("secret", [_KEY, _JWT], ids=["private-key", "jwt"])
def test_a_secret_cut_by_a_window_edge_never_ships(secret: str, edge: str) -> None:
    _, raw = prepare_encoded(_event(_straddling(secret, edge)), MAX_BYTES)
    assert len(raw) <= MAX_BYTES * 0.9  # redaction alone brought it under the cap
    pieces = [*_KEY_BODY, *secret.split(".")] if secret is _JWT else _KEY_BODY
    for piece in pieces:
        assert piece.encode() not in raw
    assert b"ghp_aB3dE5" not in raw


def test_an_orphan_end_line_redacts_from_the_start_of_the_text() -> None:
    from pipeline import redact_secrets

    tail = "\n".join(_KEY_BODY[20:]) + "\n-----END RSA PRIVATE KEY-----\nafter"
    assert redact_secrets(tail) == "[REDACTED:private-key]\nafter"
