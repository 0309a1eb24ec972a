"""Token bench: observer input per tool call and per observation, the original's scheme vs memq's.

Run from the repository root: `.venv/bin/python bench/tokens.py` (a few seconds, no network).
It replays bench/corpus/session.jsonl (a real session on this repository, bench/make_corpus.py)
through pure prompt building and counts the characters each observer call would send (~tokens
= chars / 4). The observer's replies, which later calls carry as history, are the fake
observer's `deterministic_reply` (one `<observation>` per tool call, a `<summary>` when asked);
observations are counted after content-hash deduplication, as both systems store them.

(a) The original: one call for its init prompt, then one per tool call and one for the summary;
every call re-sends the whole conversation (init prompt, every earlier message and reply: no
bound), tool fields double-encoded (JSON.stringify of the stored JSON text, reference §1.5), no
caching counted. Its OpenAI-compatible path appends each reply twice (§9.3, §13.5).
(b) memq: the worker's own turn planning (stream reads of MEMQ_BATCH_MAX_EVENTS entries,
`plan_turns`), `conversation_state`/`user_message`, `bounded_history` (MEMQ_HISTORY_TURNS,
MEMQ_HISTORY_CHARS), tool fields rendered once (pretty JSON); the system prompt is the cached
prefix (Anthropic prompt caching) on every call after the first.
Both use memq's prompt texts (mode `code`), so only the schemes differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec

from bench.common import markdown_table
from pipeline import compute_observation_content_hash, parse_agent_xml
from pipeline.batching import plan_turns
from pipeline.conversation import (
    Exchange,
    ObserverState,
    bounded_history,
    conversation_state,
    user_message,
)
from pipeline.events import Event, Prompt, Summarize, ToolCall, decode_event, encode_event
from pipeline.mode_files import load_mode
from pipeline.modes import Mode
from pipeline.prompts import build_init_prompt, build_summary_prompt, format_timestamp
from pipeline.truncate import truncate_observation_field
from tests.support.fake_observer import RecordedRequest, deterministic_reply
from worker.ingest.producer import prepare_event
from worker.settings import Settings

CORPUS = Path(__file__).resolve().parent / "corpus" / "session.jsonl"
CACHE_READ_PRICE = 0.1  # Anthropic bills cache reads at a tenth of the input price
CONTEXT_CHARS = 800_000  # a 200k-token context window at ~4 chars a token


class Scheme(msgspec.Struct, kw_only=True):
    """What one scheme sent the observer over the whole session."""

    name: str
    calls: int = 0
    cached: int = 0
    uncached: int = 0
    tool_calls: int = 0
    observations: set[str] = msgspec.field(default_factory=set)
    sizes: list[int] = msgspec.field(default_factory=list)

    def add_call(self, cached: int, uncached: int) -> None:
        self.calls += 1
        self.cached += cached
        self.uncached += uncached
        self.sizes.append(cached + uncached)

    @property
    def largest_call(self) -> int:
        return max(self.sizes, default=0)

    def store(self, session: str, reply: str, mode: Mode) -> None:
        """Keep the reply's observations by content hash (duplicates are stored once)."""
        for obs in parse_agent_xml(reply, valid_types=mode.type_ids).observations:
            facts = tuple(obs.facts)
            self.observations.add(
                compute_observation_content_hash(session, obs.title, obs.narrative, facts)
            )

    @property
    def total(self) -> int:
        return self.cached + self.uncached

    @property
    def billed(self) -> float:
        """Input chars as billed: cache reads at a tenth."""
        return self.uncached + CACHE_READ_PRICE * self.cached


def reply_to(system: str, user: str) -> str:
    """The instant fake observer's answer to one user message."""
    request = RecordedRequest(provider="anthropic", path="/v1/messages", headers={}, body={},
                              system=system, user=user, messages=[], received_at=0.0)  # fmt: skip
    return deterministic_reply(request).text


def double_encoded(value: object) -> str:
    """What the original's observer saw for a tool field: JSON.stringify twice, then its cut."""
    once = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    twice = json.dumps(once, ensure_ascii=False)
    return truncate_observation_field(twice)  # a string that is not JSON text: kept as it is


def original_observation_prompt(call: ToolCall, mode: Mode) -> str:
    """The original's per-call message layout (reference §1.5): unescaped, double-encoded fields."""
    lines = [
        "<observed_from_primary_session>",
        f"  <what_happened>{call.tool_name}</what_happened>",
        f"  <occurred_at>{format_timestamp(call.occurred_at)}</occurred_at>",
        *([f"  <working_directory>{call.cwd}</working_directory>"] if call.cwd else []),
        f"  <parameters>{double_encoded(call.tool_input)}</parameters>",
        f"  <outcome>{double_encoded(call.tool_output)}</outcome>",
        "</observed_from_primary_session>",
    ]
    return "\n".join(lines) + "\n\n" + mode.prompts.observation_instruction


def original(events: Sequence[Event], mode: Mode, replies_kept: int, cached: bool) -> Scheme:
    """The original: a call per tool call, unbounded history, each reply kept `replies_kept` times.

    `cached` is its best case on the Claude path: every call re-reads the previous call's whole
    input from the prompt cache (Claude Code caches the conversation prefix); the original sets
    up no caching itself, so the table's baseline leaves it out.
    """
    path = "OpenAI-compatible path" if replies_kept == 2 else "Claude path"
    name = f"original, {path}: a call per tool call, full history"
    scheme = Scheme(name=name + (", whole prefix cached (best case)" if cached else ""))
    first = events[0]
    opening = first if isinstance(first, Prompt) else None
    init = build_init_prompt(
        mode, project=first.project, memory_session_id=first.memory_session_id,
        user_prompt=opening.prompt_text if opening else "", prompt_number=1,
        requested_at=first.occurred_at,
    )  # fmt: skip
    history = len(init)  # the init prompt opens the conversation and is re-sent every call
    scheme.add_call(0, history)  # its own call; its reply is taken as empty
    previous = history
    for event in events:
        if isinstance(event, ToolCall):
            user = original_observation_prompt(event, mode)
            scheme.tool_calls += 1
        elif isinstance(event, Summarize):
            user = build_summary_prompt(mode, last_assistant_message=event.last_assistant_message)
        else:
            continue  # later prompts never reach its observer (§13.6); `end` sends nothing
        hit = previous if cached else 0
        scheme.add_call(hit, history + len(user) - hit)
        previous = history + len(user)
        reply = reply_to(init, user)
        scheme.store(event.memory_session_id, reply, mode)
        history += len(user) + replies_kept * len(reply)
    return scheme


def memq(events: Sequence[Event], mode: Mode, settings: Settings) -> Scheme:
    """memq's worker path, turn by turn, as `session_run` and `TurnRunner` drive it."""
    s = settings
    scheme = Scheme(name=f"memq: batches of up to {s.batch_max_events}, last "
                         f"{s.history_turns} turns / {s.history_chars:,} chars")  # fmt: skip
    session = events[0].memory_session_id
    prepared = [prepare_event(e, s) for e in events]
    state: ObserverState | None = None
    for start in range(0, len(prepared), s.batch_max_events):
        read = prepared[start : start + s.batch_max_events]  # one XREADGROUP of the worker
        sizes = [len(encode_event(e)) for e in read]
        turns = plan_turns(
            read, max_tool_calls=s.batch_max_events, max_chars=s.batch_max_chars, sizes=sizes
        )
        for turn in turns:
            current = conversation_state(mode, session, state, turn)
            if turn.kind == "record":
                state = current
                continue
            user, new_request = user_message(mode, turn, current, s.field_budget_chars)
            history = sum(len(t.user) + len(t.assistant) for t in current.history)
            cached = len(current.system) if scheme.calls else 0  # the first call writes the cache
            scheme.add_call(cached, len(current.system) - cached + history + len(user))
            scheme.tool_calls += len(turn.tool_calls)
            reply = reply_to(current.system, user)
            scheme.store(session, reply, mode)
            current.history = bounded_history(
                [*current.history, Exchange(user=user, assistant=reply)],
                s.history_turns,
                s.history_chars,
            )
            if new_request is not None and new_request.prompt_number is not None:
                current.told_prompt_number = max(
                    current.told_prompt_number, new_request.prompt_number
                )
            state = current
    return scheme


def _ratio(value: float, baseline: float) -> str:
    return f"1/{baseline / value:.1f}" if value < baseline else f"{value / baseline:.2f}x"


def report(
    schemes: Sequence[Scheme], baseline: Scheme, events: Sequence[Event], mode: Mode
) -> None:
    """Print the corpus, the assumptions and the table."""
    calls = sum(isinstance(e, ToolCall) for e in events)
    prompts = sum(isinstance(e, Prompt) for e in events)
    init = build_init_prompt(mode, project="memq", memory_session_id="s", user_prompt="",
                             prompt_number=1, requested_at=events[0].occurred_at)  # fmt: skip
    print(
        f"Corpus: {CORPUS.relative_to(CORPUS.parents[2])}, a real session on this repository: "
        f"{calls} tool calls, {prompts} user prompts, 1 summary request "
        f"({CORPUS.stat().st_size / 1e6:.2f} MB). Prompt texts: memq's `code` mode for both "
        f"schemes (init prompt {len(init):,} chars with an empty request, the original's "
        f"6,199; per-message instructions {len(mode.prompts.observation_instruction):,} chars, "
        "the original's 670).\n"
    )
    print(
        "Characters of observer input (~tokens = chars / 4). Replies: the fake observer's "
        "deterministic reply, one observation per tool call (a summary when asked), stored "
        "after content-hash deduplication by both. Cached = input re-read from Anthropic's "
        f"prompt cache; billed = uncached + {CACHE_READ_PRICE:g} x cached (cache writes and "
        "output not counted). Ratios compare chars per stored observation with the first row.\n"
    )
    headers = ["scheme", "turns (observer calls)", "input chars total", "cached chars",
               "uncached chars", "largest call chars", "chars per tool call",
               "chars per observation", "~tokens per observation", "ratio (total)",
               "ratio (billed)"]  # fmt: skip
    base_total = baseline.total / len(baseline.observations)
    base_billed = baseline.billed / len(baseline.observations)
    rows = []
    for sc in schemes:
        per_obs = sc.total / len(sc.observations)
        rows.append([
            sc.name, sc.calls, sc.total, sc.cached, sc.uncached, sc.largest_call,
            round(sc.total / sc.tool_calls), round(per_obs), round(per_obs / 4),
            _ratio(per_obs, base_total), _ratio(sc.billed / len(sc.observations), base_billed),
        ])  # fmt: skip
    print(markdown_table(headers, rows))
    stored = ", ".join(str(len(sc.observations)) for sc in schemes)
    print(f"\nStored observations per row (from {calls} tool calls): {stored}.")
    best = next((sc for sc in schemes if sc.cached and sc.name.startswith("original")), None)
    memq8 = next((sc for sc in schemes if sc.name.startswith("memq")), None)
    if best is not None and memq8 is not None:
        mine, theirs = (sc.billed / len(sc.observations) for sc in (memq8, best))
        print(f"Billed input per observation, first memq row vs the original's best case: "
              f"{_ratio(mine, theirs)}.")  # fmt: skip
    print(
        "memq's batches of 8 are what a backlog gives (or a debounce longer than the agent's "
        "pace between tool calls); a live session whose calls arrive further apart than "
        "MEMQ_BATCH_WAIT_MS gets batches of one: the batch-1 row."
    )
    over = next((i for i, n in enumerate(baseline.sizes) if n > CONTEXT_CHARS), None)
    if over is not None:
        print(
            f"The original's conversation outgrows a 200k-token context (~{CONTEXT_CHARS:,} "
            f"chars) at call {over + 1} of {baseline.calls}: past that point it fails or compacts "
            "(Claude Code's auto-compaction), which this count does not model."
        )


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--batches", default="8,1", help="MEMQ_BATCH_MAX_EVENTS values for memq")
    p.add_argument("--history-turns", type=int, default=4)
    p.add_argument("--history-chars", type=int, default=40_000)
    a = p.parse_args()
    events = [decode_event(line) for line in a.corpus.read_bytes().splitlines() if line.strip()]
    mode = load_mode("code")
    claude = original(events, mode, replies_kept=1, cached=False)
    schemes = [
        claude,
        original(events, mode, replies_kept=2, cached=False),
        original(events, mode, replies_kept=1, cached=True),
    ]
    for batch in (int(b) for b in a.batches.split(",")):
        settings = Settings(batch_max_events=batch, history_turns=a.history_turns,
                            history_chars=a.history_chars)  # fmt: skip
        schemes.append(memq(events, mode, settings))
    report(schemes, claude, events, mode)


if __name__ == "__main__":
    main()
