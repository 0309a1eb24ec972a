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
HISTORY_CHARS), tool fields rendered once (pretty JSON); the system prompt is the cached
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

from bench.charts import Bar, Group, write_chart
from bench.common import markdown_table
from pipeline import compute_observation_content_hash, parse_agent_xml
from pipeline.events import (
    Event,
    Prompt,
    Summarize,
    ToolCall,
    decode_event,
    encode_event,
    kind_of,
)
from pipeline.prompting.conversation import (
    HISTORY_CHARS,
    ObserverState,
    conversation_state,
    user_message,
)
from pipeline.prompting.mode_files import load_mode
from pipeline.prompting.modes import Mode
from pipeline.prompting.prompts import (
    SessionHeader,
    build_init_prompt,
    build_observation_prompt,
    build_summary_prompt,
    format_timestamp,
)
from pipeline.prompting.truncate import truncate_observation_field
from pipeline.turns.batching import plan_turns
from pipeline.turns.due import BatchPolicy, Waiting, due_at_ms
from pipeline.turns.settle import Answer, HistoryLimits, record, settle
from tests.support.fake_observer import RecordedRequest, deterministic_reply
from worker.ingest.producer import prepare_event
from worker.settings import Settings

CORPUS = Path(__file__).resolve().parent / "corpus" / "session.jsonl"
CACHE_READ_PRICE = 0.1  # Anthropic bills cache reads at a tenth of the input price
CACHE_WRITE_PRICE = 1.25  # and cache writes (5-minute cache) at 1.25 times it
# The default observer, claude-haiku-4-5, caches a prefix of 4,096 tokens or more only.
MIN_CACHE_TOKENS = 4096
CONTEXT_CHARS = 800_000  # a 200k-token context window at ~4 chars a token


class Scheme(msgspec.Struct, kw_only=True):
    """What one scheme sent the observer over the whole session."""

    name: str
    calls: int = 0
    cached: int = 0
    written: int = 0
    uncached: int = 0
    tool_calls: int = 0
    observations: set[str] = msgspec.field(default_factory=set)
    sizes: list[int] = msgspec.field(default_factory=list)

    def add_call(self, cached: int, uncached: int, written: int = 0) -> None:
        self.calls += 1
        self.cached += cached
        self.written += written  # part of uncached: sent once more and written to the cache
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
        """Input chars as billed: cache reads at 0.1, cache writes at 1.25."""
        return (
            self.uncached + (CACHE_WRITE_PRICE - 1) * self.written + CACHE_READ_PRICE * self.cached
        )


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
        mode,
        SessionHeader(
            project=first.project,
            memory_session_id=first.memory_session_id,
            user_prompt=opening.prompt_text if opening else "",
            prompt_number=1,
            requested_at=first.occurred_at,
        ),
    )
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


def memq(events: Sequence[Event], mode: Mode, settings: Settings, *, live: bool,
         min_cache_chars: int) -> Scheme:  # fmt: skip
    """memq's worker path, turn by turn: the same pure steps `TurnRunner` takes.

    `live`: events arrive at their recorded `occurred_at` and a turn runs when it is due
    (`pipeline.turns.due`: a full batch, a request boundary, or MEMQ_BATCH_MAX_WAIT_S); otherwise
    the whole session is a backlog read MEMQ_BATCH_MAX_EVENTS entries at a time.
    """
    s = settings
    pace = "backlog"
    if live:
        pace = f"live pace, due by need (wait <= {s.batch_max_wait_s:g} s)"
        if not s.batch_max_wait_s:
            pace = "live pace, a turn as soon as a call arrives"
    history = f", last {s.history_turns} raw turns" if s.history_turns else ""
    scheme = Scheme(name=f"memq: {pace}, batches of up to {s.batch_max_events}{history}")
    session = events[0].memory_session_id
    prepared = [prepare_event(e, s).event for e in events]
    reads = live_reads(prepared, s) if live else backlog_reads(prepared, s)
    state: ObserverState | None = None
    limits = HistoryLimits(turns=s.history_turns, chars=HISTORY_CHARS)
    cached_prefix = ""  # what the provider's cache holds (the last call's cacheable prefix)
    for read in reads:
        sizes = [len(encode_event(e)) for e in read]
        for plan in plan_turns(read, max_tool_calls=s.batch_max_events,
                               max_chars=s.batch_max_chars, sizes=sizes):  # fmt: skip
            current = conversation_state(mode, session, state, plan)
            if plan.kind == "record":
                state = record(session, plan, current, policy=s.decision_policy,
                               now=plan.events[-1].occurred_at).state  # fmt: skip
                continue
            user, told = user_message(mode, plan, current, s.field_budget_chars)
            prefix = current.system + "".join(t.user + t.assistant for t in current.history)
            cacheable = prefix if len(prefix) >= min_cache_chars else ""
            hit = len(cacheable) if cacheable and cacheable == cached_prefix else 0
            written = len(cacheable) - hit
            scheme.add_call(hit, len(prefix) + len(user) - hit, written=written)
            cached_prefix = cacheable or cached_prefix
            scheme.tool_calls += len(plan.tool_calls)
            reply = reply_to(current.system, user)
            scheme.store(session, reply, mode)
            answer = Answer(user=user, text=reply, model="bench", provider="anthropic",
                            parsed=parse_agent_xml(reply, valid_types=mode.type_ids))  # fmt: skip
            now = plan.events[-1].occurred_at
            state = settle(session, plan, current, answer, told=told, history=limits,
                           now=now, policy=s.decision_policy).state  # fmt: skip
    return scheme


def backlog_reads(events: Sequence[Event], settings: Settings) -> list[list[Event]]:
    """A backlog: the worker reads MEMQ_BATCH_MAX_EVENTS entries at a time."""
    n = settings.batch_max_events
    return [list(events[i : i + n]) for i in range(0, len(events), n)]


def live_reads(events: Sequence[Event], settings: Settings) -> list[list[Event]]:
    """What a worker reads when each event is published at its `occurred_at`: the waiting
    events whenever they become due (a simulated clock; nothing sleeps)."""
    policy = BatchPolicy(max_events=settings.batch_max_events, max_chars=settings.batch_max_chars,
                         max_wait_ms=int(settings.batch_max_wait_s * 1000))  # fmt: skip
    reads: list[list[Event]] = []
    waiting: list[Event] = []

    def due_at() -> int:
        kinds = [kind_of(e) for e in waiting]
        sizes = [len(encode_event(e)) for e in waiting]
        times = [_ms(e) for e in waiting]
        return due_at_ms(Waiting(kinds=kinds, sizes=sizes, published_ms=times), policy)

    for event in events:
        if waiting and due_at() <= _ms(event):  # it fell due before this event arrived
            reads.append(waiting)
            waiting = []
        waiting.append(event)
        if due_at() <= _ms(event):
            reads.append(waiting)
            waiting = []
    if waiting:
        reads.append(waiting)
    return reads


def _ms(event: Event) -> int:
    return int(event.occurred_at.timestamp() * 1000)


def framed_call_chars(events: Sequence[Event], mode: Mode, settings: Settings) -> float:
    """The mean size of one tool call as `build_observation_prompt` frames it, alone."""
    prepared = (prepare_event(e, settings).event for e in events)
    calls = [e for e in prepared if isinstance(e, ToolCall)]
    budget = settings.field_budget_chars
    sizes = [len(build_observation_prompt(c, mode=mode, field_budget_chars=budget)) for c in calls]
    return sum(sizes) / len(sizes)


def _ratio(value: float, baseline: float) -> str:
    return f"1/{baseline / value:.1f}" if value < baseline else f"{value / baseline:.2f}x"


def report(corpus: Path, schemes: Sequence[Scheme], events: Sequence[Event], mode: Mode,
           framed: float) -> Group:  # fmt: skip
    """Print one corpus's table (per scheme, input per call, per tool call, per observation);
    returns its billed tokens per observation as a chart group."""
    calls = sum(isinstance(e, ToolCall) for e in events)
    prompts = sum(isinstance(e, Prompt) for e in events)
    summaries = sum(isinstance(e, Summarize) for e in events)
    span = events[-1].occurred_at - events[0].occurred_at
    print(
        f"\n#### {corpus.name}: {calls} tool calls, {prompts} user prompts, {summaries} summary "
        f"requests over {span.total_seconds() / 60:.0f} minutes ({corpus.stat().st_size / 1e6:.2f}"
        f" MB). One tool call framed alone by `build_observation_prompt`: {framed:,.0f} chars "
        f"on average; target per stored observation <= 1.5 x that = {1.5 * framed:,.0f}.\n"
    )
    headers = ["scheme", "observer calls", "input chars", "cache reads", "cache writes",
               "chars per tool call", "chars per observation", "~tokens per observation",
               "billed chars per observation", "x framed call"]  # fmt: skip
    rows = []
    for sc in schemes:
        n = len(sc.observations)
        per_obs = sc.total / n
        rows.append([
            sc.name, sc.calls, sc.total, sc.cached, sc.written, round(sc.total / sc.tool_calls),
            round(per_obs), round(per_obs / 4), round(sc.billed / n), f"{per_obs / framed:.2f}",
        ])  # fmt: skip
    print(markdown_table(headers, rows))
    stored = ", ".join(str(len(sc.observations)) for sc in schemes)
    print(f"\nStored observations per row (from {calls} tool calls): {stored}.")
    bars = [Bar(label, sc.billed / len(sc.observations) / 4, min(i, 1))
            for i, (label, sc) in enumerate(zip(CHART_LABELS, schemes, strict=True))]  # fmt: skip
    return Group(f"{corpus.name} ({calls} tool calls)", bars)


CORPORA = (CORPUS, CORPUS.parent / "json_session.jsonl")
# The chart's short names for main()'s schemes, in its order.
CHART_LABELS = ("original: full history", "memq: backlog", "memq: live, by need",
                "memq: live, a turn per call", "memq: live, by need + 4 turns")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    p.add_argument("--corpus", type=Path, action="append", help="default: both bench corpora")
    p.add_argument("--batch", type=int, default=8, help="MEMQ_BATCH_MAX_EVENTS")
    p.add_argument("--max-wait-s", type=float, default=30.0, help="MEMQ_BATCH_MAX_WAIT_S")
    p.add_argument(
        "--min-cache-tokens",
        type=int,
        default=MIN_CACHE_TOKENS,
        help="the model's shortest cacheable prefix (claude-haiku-4-5: 4096)",
    )
    p.add_argument("--chart", type=Path, help="also write the billed-tokens chart (SVG) here")
    a = p.parse_args()
    mode = load_mode("code")
    min_cache_chars = a.min_cache_tokens * 4
    print(
        "Characters of observer input (~tokens = chars / 4). Replies: the fake observer's "
        "deterministic reply, one observation per tool call (a summary when asked), stored "
        "after content-hash deduplication. Cache: Anthropic's, on the system prompt (and the "
        f"last raw exchange when history is on), only for a prefix of {a.min_cache_tokens:,} "
        f"tokens or more (~{min_cache_chars:,} chars); billed = uncached + "
        f"{CACHE_WRITE_PRICE - 1:g} x cache writes + {CACHE_READ_PRICE:g} x cache reads."
    )
    groups = []
    for corpus in a.corpus or CORPORA:
        events = [decode_event(line) for line in corpus.read_bytes().splitlines() if line.strip()]
        base = Settings(batch_max_events=a.batch, batch_max_wait_s=a.max_wait_s, history_turns=0)
        framed = framed_call_chars(events, mode, base)
        schemes = [original(events, mode, replies_kept=1, cached=False)]
        schemes.append(memq(events, mode, base, live=False, min_cache_chars=min_cache_chars))
        schemes.append(memq(events, mode, base, live=True, min_cache_chars=min_cache_chars))
        each = msgspec.structs.replace(base, batch_max_wait_s=0.0)  # a turn per call, as before
        schemes.append(memq(events, mode, each, live=True, min_cache_chars=min_cache_chars))
        history = msgspec.structs.replace(base, history_turns=4)
        schemes.append(memq(events, mode, history, live=True, min_cache_chars=min_cache_chars))
        groups.append(report(corpus, schemes, events, mode, framed))
    if a.chart:
        title = "Billed observer input per stored observation (~tokens; the original in blue)"
        chart = write_chart(a.chart, title, "~tokens per observation", groups, log=True)
        print(f"\nchart: {chart}")


if __name__ == "__main__":
    main()
