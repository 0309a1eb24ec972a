"""Pipeline benchmark: CPU per tool call (prompt + parse + hash), adversarial replies, scrubbing.

Run from the repository root: `.venv/bin/python bench/pipeline.py` (about a minute on an idle
machine). Prints markdown tables and the machine. Targets (issue 2): <= 40 µs per 2 KB event;
adversarial parse time linear (16 MiB <= 20x the 1 MiB time) and under 1 s at 16 MiB.
Timings move with the machine and its load: the first line gives a speed check to compare by.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.events import ToolCall
from pipeline.prompting.framing import render_tool_field
from pipeline.prompting.mode_files import load_mode
from pipeline.prompting.modes import Mode
from pipeline.prompting.prompts import build_observation_prompt
from pipeline.redaction.privacy import strip_private_tags
from pipeline.redaction.redact import redact_secrets
from pipeline.replies.classify import classify_observer_output
from pipeline.replies.parser import parse_agent_xml, strip_code_fences
from pipeline.turns.content_hash import compute_observation_content_hash

SIZES = (200, 2_000, 20_000, 200_000)
VARIANTS = 8  # events per (size, kind): different text, so no cache flatters a row
BATCH = 8  # worker.settings: batch_max_events
ADVERSARIAL_MIB = (1, 4, 16)
SESSION = "bench-session-0001"
_T0 = datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC)
_WORDS = (
    "cart", "order", "user", "item", "price", "total", "discount", "coupon", "stream", "entry",
    "batch", "session", "cache", "token", "limit", "retry", "payload", "record", "queue",
    "worker", "event", "handler", "config", "client", "result",
)  # fmt: skip


# Realistic tool outputs, each `size` characters of text --------------------------------------


def _ident(rng: random.Random, parts: int = 2) -> str:
    return "_".join(rng.choice(_WORDS) for _ in range(parts))


def _fill(make: Callable[[], str], size: int, head: str = "") -> str:
    """`head` then pieces from `make` until `size` characters, cut there."""
    pieces, length = [head], len(head)
    while length < size:
        pieces.append(make())
        length += len(pieces[-1])
    return "".join(pieces)[:size]


def python_source(rng: random.Random, size: int) -> str:
    def function() -> str:
        name, arg, key = _ident(rng), _ident(rng, 1), rng.choice(_WORDS)
        limit = rng.randint(1, 500)
        return (
            f"\n\ndef {name}({arg}: dict[str, Any], *, limit: int = {limit}) -> float:"
            f'\n    """Return the {rng.choice(_WORDS)} of a {rng.choice(_WORDS)} after rules."""'
            f"\n    if not {arg} or limit <= 0:"
            f"\n        raise ValueError(f'empty {arg}: {{limit!r}}')"
            f"\n    total = sum(x['{key}'] * x.get('qty', 1) for x in {arg}.values())"
            f"\n    return round(total * (1 - {rng.random():.2f}) if total > limit else total, 2)"
        )

    return _fill(function, size, '"""Shopping cart pricing rules."""\n\nfrom typing import Any\n')


def grep_output(rng: random.Random, size: int) -> str:
    def line() -> str:
        path = f"src/{_ident(rng, 1)}/{_ident(rng)}.py"
        code = f"{_ident(rng)} = {rng.choice(_WORDS)}.get('{_ident(rng, 1)}') or {{}}"
        return f"{path}:{rng.randint(1, 900)}:    {code}\n"

    return _fill(line, size)


def pytest_output(rng: random.Random, size: int) -> str:
    def line() -> str:
        test = f"tests/test_{_ident(rng, 1)}.py::test_{_ident(rng, 3)}"
        if rng.random() < 0.9:
            return f"{test} PASSED{' ' * 12}[{rng.randint(1, 99):3d}%]\n"
        return (
            f"{test} FAILED\n\n    def test_total():\n>       assert cart.total() == 90\n"
            f"E       AssertionError: assert 100.0 == 90\nE        +  where 100.0 = "
            f"<bound method Cart.total of <Cart items=3>>()\n\ntests/test_cart.py:"
            f"{rng.randint(1, 300)}: AssertionError\n"
        )

    head = (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.6.0\n"
        "rootdir: /home/dev/shop\ncollected 412 items\n\n"
    )
    return _fill(line, size, head)


def json_output(rng: random.Random, size: int) -> str:
    """A JSON API answer of about `size` characters (whole records: it must stay JSON)."""
    records: list[dict[str, Any]] = []
    length = 0
    while length < size:
        records.append({
            "id": rng.randint(1, 10**9), "sku": f"SKU-{rng.randint(1000, 9999)}",
            "name": f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS)}",
            "price": round(rng.uniform(1, 500), 2), "tags": rng.sample(_WORDS, 3),
            "in_stock": rng.random() < 0.7, "updated_at": "2025-03-14T09:26:53Z",
        })  # fmt: skip
        length += len(json.dumps(records[-1])) + 2
    return json.dumps({"items": records, "next": None})


@functools.cache
def corpus(size: int) -> list[tuple[ToolCall, str]]:
    """Tool calls as the Claude Code hook sends them, each with a plausible observer reply."""
    rng = random.Random(size)
    events: list[tuple[ToolCall, str]] = []
    for n in range(VARIANTS):
        path = f"/home/dev/shop/src/{_ident(rng, 1)}/{_ident(rng)}.py"
        shapes: list[tuple[str, Any, Any]] = [
            ("Read", {"file_path": path},
             {"type": "text", "file": {"filePath": path, "content": python_source(rng, size),
                                       "numLines": size // 40, "startLine": 1}}),
            ("Grep", {"pattern": _ident(rng), "path": "src", "output_mode": "content", "-n": True},
             {"mode": "content", "numFiles": 7, "filenames": [],
              "content": grep_output(rng, size), "numLines": size // 60}),
            ("Bash", {"command": "pytest -q tests/", "timeout": 120000},
             {"stdout": pytest_output(rng, size), "stderr": "", "interrupted": False}),
            ("mcp__shop__list_items", {"limit": 50, "cursor": None}, json_output(rng, size)),
        ]  # fmt: skip
        for k, (tool, tool_input, output) in enumerate(shapes):
            call = ToolCall(
                event_id=f"evt-{size}-{n}-{k}", memory_session_id=SESSION, project="shop",
                occurred_at=_T0 + timedelta(seconds=n * 4 + k), tool_name=tool,
                tool_input=tool_input, tool_output=output, cwd="/home/dev/shop",
                tool_use_id=f"toolu_{size}_{n}_{k}",
            )  # fmt: skip
            events.append((call, observer_reply(rng, path, observations=1 + (n + k) % 2)))
    return events


def observer_reply(rng: random.Random, path: str, observations: int) -> str:
    """What an LLM typically answers: 1-2 observations in the skeleton's layout, a few facts,
    entities; now and then a fence, a sentence before the XML, fields out of order or a raw `<`.
    """
    blocks = []
    for _ in range(observations):
        name = _ident(rng)
        raw_lt = rng.random() < 0.1  # `a < b` left unescaped: a `<` that is not a tag
        facts = "\n".join(
            f"    <fact>{name}() returns {rng.choice(_WORDS)} {'<' if raw_lt else '&lt;'} limit "
            f"when the {rng.choice(_WORDS)} is empty &amp; the {rng.choice(_WORDS)} cache is cold"
            "</fact>"
            for _ in range(rng.randint(2, 5))
        )
        fields = {
            "type": rng.choice(("discovery", "bugfix", "change", "feature")),
            "title": f"{name.replace('_', ' ').capitalize()} applies the discount twice",
            "subtitle": f"Found while reading {Path(path).name}",
            "facts": f"\n{facts}\n  ",
            "narrative": (
                f"The agent read {path} and found that {name}() sums the {rng.choice(_WORDS)} "
                "before the limit check, so orders over the limit get the discount applied "
                "twice; the tests in tests/test_cart.py only cover totals under the limit, "
                "which is why the bug went unnoticed."
            ),
            "concepts": "".join(
                f"\n    <concept>{c}</concept>" for c in ("problem-solution", "gotcha")
            )
            + "\n  ",
            "files_read": f"\n    <file>{path}</file>\n  ",
            "files_modified": "\n  ",
        }
        order = list(fields)
        if rng.random() < 0.15:  # narrative before facts
            order[3], order[4] = order[4], order[3]
        body = "".join(f"\n  <{field}>{fields[field]}</{field}>" for field in order)
        blocks.append(f"<observation>{body}\n</observation>")
    reply = "\n".join(blocks)
    if rng.random() < 0.15:
        reply = f"Recording what the agent found.\n\n{reply}"
    return f"```xml\n{reply}\n```" if rng.random() < 0.2 else reply


# Measurement ---------------------------------------------------------------------------------


def batches(size: int, per_batch: int) -> list[tuple[list[ToolCall], str]]:
    """The corpus as the worker sends it: `per_batch` calls per prompt, one reply per prompt.

    A batched reply holds the observations of two of its calls' replies (2 to 4 in all).
    """
    events = corpus(size)
    if per_batch == 1:
        return [([call], reply) for call, reply in events]
    grouped = []
    for start in range(0, len(events), per_batch):
        group = events[start : start + per_batch]
        blocks = [strip_code_fences(reply) for _, reply in group[:2]]
        grouped.append(([call for call, _ in group], "\n".join(blocks)))
    return grouped


def pipeline_row(
    mode: Mode, size: int, budget_s: float, per_batch: int = 1, blocks: int = 5
) -> tuple[float, float, float, float]:
    """Median µs per event of prompt, parse, hash and all three, in the quietest of `blocks`
    equal slices of the time budget (the machine is shared: a slice may be disturbed)."""
    work = batches(size, per_batch)
    types = mode.type_ids
    best: tuple[float, float, float, float] | None = None
    clock = time.perf_counter
    for _ in range(blocks):
        stages: tuple[list[float], ...] = ([], [], [], [])
        gc.collect()
        deadline = clock() + budget_s / blocks
        rounds = 0
        while rounds < 2 or (clock() < deadline and rounds < 100):
            rounds += 1
            for calls, reply in work:
                t0 = clock()
                build_observation_prompt(calls, mode=mode)
                t1 = clock()
                parsed = parse_agent_xml(reply, valid_types=types)
                t2 = clock()
                for o in parsed.observations:
                    compute_observation_content_hash(SESSION, o.title, o.narrative, o.facts)
                t3 = clock()
                times = (t1 - t0, t2 - t1, t3 - t2, t3 - t0)
                for stage, took in zip(stages, times, strict=True):
                    stage.append(took / len(calls))
                if not parsed.observations:
                    raise SystemExit(f"a corpus reply did not parse: {parsed.reason}")
        prompt, parse, hashing, total = (statistics.median(s) * 1e6 for s in stages)
        if best is None or total < best[3]:
            best = (prompt, parse, hashing, total)
    assert best is not None
    return best


_OBS = "<observation><type>bugfix</type><title>t</title>"
_FACTS = (_OBS + "<facts>", "</facts></observation>")
ADVERSARIAL: dict[str, tuple[str, str, str]] = {  # name: (head, repeated unit, tail)
    "unclosed tags": ("", "<observation><title>x<facts><fact>y<concepts>", ""),
    "`<observation>` openers only": ("", "<observation>", ""),
    "openers, one close at the end": ("", "<observation>", "</observation>"),
    "nested `<observation>` pairs": ("", "<observation>", "</observation>" * 1000),
    "deep nesting `<a><a>…` in a block": (_OBS, "<a>", "</observation>"),
    "many `<fact>` in one observation": (_FACTS[0], "<fact>a fact</fact>", _FACTS[1]),
    "many `<FACT>` (upper case: per-tag path)": (_FACTS[0], "<FACT>a fact</FACT>", _FACTS[1]),
    "many complete observations": ("", "<observation><title>a title</title></observation>", ""),
    "entity flood in a field": (
        _OBS + "<narrative>", "&amp;&lt;&#60;&#x1F600;", "</narrative></observation>"
    ),
    "unclosed attribute `<observation a=…`": ("<observation ", "a=b ", ""),
    "`<skip_summary` + whitespace": ("", "<skip_summary" + " " * 50, ""),
    "unclosed CDATA / comments": (_OBS, "<![CDATA[<!--<observation>", ""),
    "prose flood (no tags)": ("", "You have hit the usage limit for claude, reset soon. ", ""),
}  # fmt: skip


def adversarial(name: str, mib: int) -> str:
    head, unit, tail = ADVERSARIAL[name]
    return head + unit * (((mib << 20) - len(head) - len(tail)) // len(unit)) + tail


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Fastest of `repeats` runs, in seconds: the run least disturbed by other processes."""
    times = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def adversarial_row(name: str, types: tuple[str, ...]) -> tuple[list[float], list[float]]:
    """Seconds for parse_agent_xml and for classify_observer_output at each size."""
    parse, classify = [], []
    for mib in ADVERSARIAL_MIB:
        text = adversarial(name, mib)
        repeats = 3
        parse.append(best_of(functools.partial(parse_agent_xml, text, valid_types=types), repeats))
        classify.append(best_of(functools.partial(classify_observer_output, text), repeats))
    return parse, classify


def scrub_rows() -> list[tuple[str, str, float, float]]:
    """Median µs of each producer scrub over the rendered text of the corpus's outputs."""
    rows = []
    scrubs: tuple[tuple[str, Callable[[str], str]], ...] = (
        ("redact_secrets", redact_secrets),
        ("strip_private_tags", strip_private_tags),
    )
    for fn_name, fn in scrubs:
        for kind in ("Read", "Grep", "Bash", "mcp__shop__list_items"):
            medians = []
            for size in (2_000, 200_000):
                texts = [render_tool_field(c.tool_output) for c, _ in corpus(size)]
                texts = texts[("Read", "Grep", "Bash", "mcp__shop__list_items").index(kind) :: 4]
                samples = []
                for _ in range(40 if size < 10_000 else 3):
                    for text in texts:
                        started = time.perf_counter()
                        fn(text)
                        samples.append(time.perf_counter() - started)
                medians.append(statistics.median(samples) * 1e6)
            rows.append((f"`{fn_name}`", kind, medians[0], medians[1]))
    return rows


def speed_check_us() -> float:
    """Best µs for `sum(range(1000))`, to compare runs and machines (14-17 µs on the 2-vCPU
    Xeon VM these tables were first made on; its Python is a pyenv build without PGO)."""
    return min(timeit.repeat("sum(range(1000))", number=2000, repeat=20)) / 2000 * 1e6


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"nproc {len(os.sched_getaffinity(0))}, {model}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; load average {load}"
    )


def main() -> None:
    started = time.perf_counter()
    mode = load_mode("code")
    print(f"Machine: {machine()}; speed check `sum(range(1000))` {speed_check_us():.1f} µs\n")
    print(
        "Realistic corpus: median µs per event, quietest of 5 half-second slices (4 tool kinds"
        " x 8 variants per size; one observer reply of 1-2 observations per call, or per batch"
        " in the last row)\n"
    )
    print("| tool output | prompt build | parse reply | hash | total | target |")
    print("|---|---:|---:|---:|---:|---|")
    rows = [(size, 1) for size in SIZES] + [(2_000, BATCH)]
    for size, per_batch in rows:
        prompt, parse, hashing, total = pipeline_row(mode, size, 2.5, per_batch)
        target = f"≤ 40 µs {'✅' if total <= 40 else '❌'}" if size == 2_000 else ""
        label = f"{size / 1000:g} KB" if size >= 1000 else f"{size} B"
        if per_batch > 1:
            label += f", {per_batch} calls per prompt and reply (the worker's default batch)"
        print(f"| {label} | {prompt:.1f} | {parse:.1f} | {hashing:.1f} | {total:.1f} | {target} |")

    print("\nAdversarial replies: seconds, best of 3\n")
    print(
        "| input | parse 1 MiB | 4 MiB | 16 MiB | 16/1 | target | classify 1 MiB | 16 MiB | 16/1 |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for name in ADVERSARIAL:
        (p1, p4, p16), (c1, _, c16) = adversarial_row(name, mode.type_ids)
        ok = "✅" if p16 <= 20 * p1 and p16 < 1 else "❌"
        print(
            f"| {name} | {p1:.4f} | {p4:.4f} | {p16:.4f} | {p16 / p1:.1f}x | {ok} "
            f"| {c1:.4f} | {c16:.4f} | {c16 / c1:.1f}x |"
        )

    print("\nProducer scrubbing: median µs per tool output (its rendered text)\n")
    print("| function | tool | 2 KB | 200 KB |")
    print("|---|---|---:|---:|")
    for fn_name, kind, small, large in scrub_rows():
        print(f"| {fn_name} | {kind} | {small:.1f} | {large:.1f} |")
    print(f"\n(ran in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
