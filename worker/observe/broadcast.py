"""The announcement of stored rows on Redis: PUBLISH on the channel, XADD to the capped feed."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from redis.asyncio.client import Pipeline

from worker.connect.lua import LuaScript
from worker.keys import Keys
from worker.storage.records import StoredRow

_ENCODER = msgspec.json.Encoder()

# One call a batch instead of an XADD and a PUBLISH per row (each a command to pack and parse).
# KEYS: feed   ARGV: channel, maxlen, then (payload, kind, id)*
_ANNOUNCE = LuaScript("""
for i = 3, #ARGV, 3 do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*',
             'payload', ARGV[i], 'kind', ARGV[i + 1], 'id', ARGV[i + 2])
  redis.call('PUBLISH', ARGV[1], ARGV[i])
end
return (#ARGV - 2) / 3
""")


def payload(row: StoredRow) -> bytes:
    """The JSON payload of one stored row, the same on pub/sub and in the feed."""
    return _ENCODER.encode(row)


def queue_announce(pipe: Pipeline, keys: Keys, feed_maxlen: int, rows: Sequence[StoredRow]) -> None:
    """Add the XADD and PUBLISH of each row (in order) to a pipeline the caller runs."""
    if not rows:
        return
    args: list[str | int | bytes] = [keys.observations, feed_maxlen]
    for row in rows:
        args += [payload(row), row.kind, row.id]
    _ANNOUNCE.queue(pipe, [keys.feed], args)
