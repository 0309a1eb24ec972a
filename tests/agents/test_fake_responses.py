"""The fake Responses API itself: scripts per conversation, the SSE stream, repeated searches."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from tests.support.agent_models.responses import (
    CustomCall,
    FakeResponses,
    FunctionCall,
    Message,
    ToolSearch,
    fake_responses_fixture,  # noqa: F401 (imported to register the fixture)
)


def _post(fake: FakeResponses, conversation: str, *items: dict[str, Any]) -> list[dict[str, Any]]:
    """One streamed request; the decoded SSE events (name checked against the data's type)."""
    body = {"model": "gpt-5.5", "stream": True, "prompt_cache_key": conversation,
            "input": [{"type": "message", "role": "user", "content": "hi"}, *items]}  # fmt: skip
    request = urllib.request.Request(
        fake.base_url + "/responses", data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["content-type"] == "text/event-stream"
        frames = response.read().decode().strip().split("\n\n")
    events = []
    for frame in frames:
        name, data = frame.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        events.append(event)
    return events


def _item(events: list[dict[str, Any]]) -> dict[str, Any]:
    done = events[-1]
    assert done["type"] == "response.completed"
    (item,) = done["response"]["output"]
    return dict(item)


def test_each_conversation_plays_its_own_script_then_says_done(
    fake_responses: FakeResponses,
) -> None:
    fake_responses.script(FunctionCall(name="exec_command", arguments={"cmd": "ls"}),
                          Message(text="listed"))  # fmt: skip
    fake_responses.script(CustomCall(name="apply_patch", input="*** Begin Patch\n"))
    first = _item(_post(fake_responses, "a"))
    assert (first["type"], first["name"]) == ("function_call", "exec_command")
    assert json.loads(first["arguments"]) == {"cmd": "ls"}
    other = _item(_post(fake_responses, "b"))  # a new conversation takes the next script
    assert (other["type"], other["input"]) == ("custom_tool_call", "*** Begin Patch\n")
    output = {"type": "function_call_output", "call_id": first["call_id"], "output": "x.py"}
    events = _post(fake_responses, "a", first, output)
    assert [e["type"] for e in events] == [
        "response.created", "response.output_item.added", "response.output_text.delta",
        "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert _item(events)["content"][0]["text"] == "listed"
    assert _item(_post(fake_responses, "a"))["content"][0]["text"] == "done."
    recorded = [(r.conversation, r.step) for r in fake_responses.requests]
    assert recorded == [("a", 0), ("b", 0), ("a", 1), ("a", 2)]
    assert fake_responses.requests[2].tool_outputs() == {first["call_id"]: "x.py"}
    assert fake_responses.requests[2].messages("user") == ["hi"]


def test_a_tool_search_that_found_nothing_is_asked_again(fake_responses: FakeResponses) -> None:
    fake_responses.script(ToolSearch(query="memq"), Message(text="found"))
    search = _item(_post(fake_responses, "c"))
    assert (search["type"], search["arguments"]["query"]) == ("tool_search_call", "memq")
    empty = {"type": "tool_search_output", "call_id": search["call_id"], "tools": []}
    again = _item(_post(fake_responses, "c", search, empty))
    assert again["type"] == "tool_search_call"  # MCP servers start in the background
    found = {**empty, "call_id": again["call_id"], "tools": [{"type": "namespace"}]}
    answer = _item(_post(fake_responses, "c", search, empty, again, found))
    assert answer["content"][0]["text"] == "found"
