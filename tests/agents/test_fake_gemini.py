"""The fake Gemini API the real Gemini CLI talks to: steps by model turn, helpers, SSE framing."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.agent_models.gemini import FakeGemini, answer, call, parallel
from tests.support.agent_models.gemini import fake_gemini_fixture as _fix_fake_gemini  # noqa: F401

MODEL = "gemini-3.1-pro-preview"
TOOLS = [{"functionDeclarations": [{"name": "read_file"}]}]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def _model_turn() -> dict[str, Any]:
    return {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {}}}]}


def _stream(fake: FakeGemini, contents: list[dict[str, Any]]) -> dict[str, Any]:
    url = f"{fake.url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    response = httpx.post(url, json={"contents": contents, "tools": TOOLS}, timeout=5)
    assert response.headers["content-type"] == "text/event-stream"
    (frame,) = [f for f in response.text.split("\r\n\r\n") if f]
    assert frame.startswith("data: ")
    chunk: dict[str, Any] = json.loads(frame.removeprefix("data: "))
    return chunk


def _parts(chunk: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = chunk["candidates"][0]["content"]["parts"]
    return parts


def test_each_request_gets_the_step_of_its_model_turn_count(fake_gemini: FakeGemini) -> None:
    fake_gemini.script([call("read_file", file_path="a.md"), answer("Done here.")])
    first = _stream(fake_gemini, [_user("go")])
    assert _parts(first) == [{"functionCall": {"name": "read_file", "args": {"file_path": "a.md"}}}]
    second = _stream(fake_gemini, [_user("go"), _model_turn(), _user("result")])
    assert _parts(second) == [{"text": "Done here."}]
    # A retried request gets the same step again; past the script the model is done.
    assert _parts(_stream(fake_gemini, [_user("go")])) == _parts(first)
    past = [_user("go"), _model_turn(), _user("r"), _model_turn(), _user("r")]
    assert _parts(_stream(fake_gemini, past)) == [{"text": "Done."}]
    assert [r.step for r in fake_gemini.agent_requests()] == [0, 1, 0, 2]
    assert "result" in fake_gemini.requests[1].text


def test_parallel_calls_are_one_turn_of_several_parts(fake_gemini: FakeGemini) -> None:
    fake_gemini.script([parallel(call("glob", pattern="*.py"), call("grep_search", pattern="x"))])
    names = [p["functionCall"]["name"] for p in _parts(_stream(fake_gemini, [_user("go")]))]
    assert names == ["glob", "grep_search"]


def test_helper_calls_get_the_plainest_value_of_their_schema(fake_gemini: FakeGemini) -> None:
    schema = {
        "type": "OBJECT",
        "properties": {"reasoning": {"type": "STRING"}, "score": {"type": "INTEGER"}},
    }
    body = {
        "contents": [_user("route this")],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema},
    }
    url = f"{fake_gemini.url}/v1beta/models/gemini-3.5-flash-lite:generateContent"
    reply = httpx.post(url, json=body, timeout=5).json()
    assert json.loads(_parts(reply)[0]["text"]) == {"reasoning": "fake", "score": 1}
    tokens = httpx.post(url.replace("generateContent", "countTokens"), json=body, timeout=5)
    assert tokens.json()["totalTokens"] > 0
    assert [(r.method, r.step) for r in fake_gemini.requests] == [
        ("generateContent", None),
        ("countTokens", None),
    ]
