"""A Messages API reply as the server-sent events a streaming client (Claude Code) reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def anthropic_sse(message: dict[str, Any]) -> bytes:
    """`message` (a complete Messages reply) as one SSE body: start, text deltas, stop."""
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in _events(message)
    )


def _events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(message["content"]):
        empty = {"type": "text", "text": ""}
        yield "content_block_start", {"type": "content_block_start", "index": i,
                                      "content_block": empty}  # fmt: skip
        delta = {"type": "text_delta", "text": block["text"]}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": delta,
                            "usage": {"output_tokens": usage["output_tokens"]}}  # fmt: skip
    yield "message_stop", {"type": "message_stop"}
