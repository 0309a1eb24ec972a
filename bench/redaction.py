"""Redaction benchmark: MB/s of `redact_secrets` on a 50 MB mix, the hook's wall time, and
how many secrets of each family reach the wire bytes from real agent payloads.

Run from the repository root: `.venv/bin/python bench/redaction.py [--before TREE]`. With
`--before`, the same measurements run against another checkout (say a worktree of main)
through `PYTHONPATH`, and both columns are printed. The hook runs as `python -S` with an
explicit PYTHONPATH, so each tree's own code is what runs. It starts its own redis-server.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, machine, percentile, private_redis
from bench.ingest import post_tool_use
from tests.support.agent_payloads import SHAPES, agent_payload
from tests.support.ordinary_corpus import ordinary_texts
from tests.support.secret_corpus import TOKENS, secret_cases
from tests.support.secret_formats import FAMILIES, family_cases

MIX_BYTES = 50 * 1024 * 1024
HOOK_RUNS = 60
COVERAGE_SEEDS = 5
# What a tree runs to count leaks: each payload through its hook reader and prepare_encoded.
_COVERAGE = """
import json, sys
from collections import Counter
from datetime import UTC, datetime
import msgspec
from pipeline import redact_secrets
from worker.ingest.agents.registry import reader_for
from worker.ingest.prepare import prepare_encoded
data = json.load(open(sys.argv[1]))
now = datetime(2026, 12, 1, tzinfo=UTC)
leaks = Counter()
for family, secret, agent, payload in data["cases"]:
    hook = reader_for(agent)(payload.encode(), project_of=lambda c: "w", host="h", now=now)
    raws = [prepare_encoded(event, 1 << 20)[1] for event in hook.events]
    escaped = msgspec.json.encode(secret)[1:-1]
    leaks[family] += any(secret.encode() in raw or escaped in raw for raw in raws)
total = kept = 0
for text in data["ordinary"]:
    before, after = Counter(text.split()), Counter(redact_secrets(text).split())
    total += sum(before.values())
    kept += sum((before & after).values())
print(json.dumps({"leaks": leaks, "kept": kept, "total": total}))
"""
# What a tree runs to time itself: redaction over the mix, and prepare_event per 2 KB call.
_MEASURE = """
import json, sys, time
from pipeline import redact_secrets
from bench.ingest import tool_call
from worker.ingest.producer import prepare_event
from worker.settings import Settings
texts = json.load(open(sys.argv[1]))
started = time.perf_counter()
for text in texts:
    redact_secrets(text)
redact_s = time.perf_counter() - started
settings = Settings()
events = [tool_call(i, "prep") for i in range(1000)]
prepare_us = float("inf")
for _ in range(5):  # the best of five: the machine is shared
    started = time.perf_counter()
    for event in events:
        prepare_event(event, settings)
    prepare_us = min(prepare_us, (time.perf_counter() - started) / len(events) * 1e6)
print(json.dumps({"redact_s": redact_s, "prepare_us": prepare_us}))
"""


def realistic_mix(size: int = MIX_BYTES, seed: int = 7) -> list[str]:
    """Tool-output-sized texts: ordinary developer text with a secret in about one in 20."""
    rng = random.Random(seed)
    texts: list[str] = []
    total = 0
    while total < size:
        for text in ordinary_texts(rng):
            if rng.random() < 0.05:
                case = rng.choice(secret_cases(rng))
                cut = rng.randrange(len(text) + 1)
                text = f"{text[:cut]}\n{case.text}\n{text[cut:]}"
            texts.append(text)
            total += len(text.encode())
    return texts


def measure(tree: Path, mix_file: Path) -> dict[str, float]:
    """Run the redaction and prepare_event timings in a fresh process importing `tree`."""
    code = _MEASURE
    env = {"PYTHONPATH": f"{tree}:{REPO}", "PATH": "/usr/bin:/bin"}
    # `bench.ingest` must come from this checkout (the old tree may lack it): REPO is second
    # on the path, and `pipeline`/`worker` resolve to `tree` first.
    # Run in `tree`: `python -c` puts the working directory first on the path.
    done = subprocess.run([sys.executable, "-c", code, str(mix_file)], env=env, cwd=tree,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def coverage_cases(seeds: int = COVERAGE_SEEDS) -> tuple[dict[str, int], list[list[str]]]:
    """Each issue-22 family's cases in every agent payload shape, `seeds` random draws each."""
    counts: dict[str, int] = {}
    cases: list[list[str]] = []
    twilio = "Twilio API keys (`SK` + 32 hex)"
    for seed in range(seeds):
        rng = random.Random(1000 + seed)
        drawn = {family: family_cases(rng, family) for family in FAMILIES}
        name, make = TOKENS["twilio-api-key"]
        key = make(rng)
        drawn[twilio] = [("twilio", f"{name}={key}\nlogged in with {key}", key)]
        for family, found in drawn.items():
            for _fmt, text, secret in found:
                for shape in SHAPES:
                    agent, raw = agent_payload(shape, text)
                    cases.append([family, secret, agent, raw.decode()])
                    counts[family] = counts.get(family, 0) + 1
    return counts, cases


def coverage(tree: Path, data_file: Path) -> dict[str, Any]:
    """Leaks per family and ordinary tokens kept, in a fresh process importing `tree`."""
    env = {"PYTHONPATH": f"{tree}:{REPO}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", _COVERAGE, str(data_file)], env=env, cwd=tree,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def hook_ms(tree: Path, url: str, data_dir: Path, runs: int = HOOK_RUNS) -> tuple[float, float]:
    """p50 and p99 wall time (ms) of whole `memq hook claude-code` processes running `tree`."""
    site = next(p for p in sys.path if p.endswith("site-packages"))
    code = "from worker.cli.entry import main; main()"
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": f"{tree}:{site}",
        "HOME": str(data_dir),
        "MEMQ_DATA_DIR": str(data_dir),
        "MEMQ_REDIS_URL": url,
        "MEMQ_PREFIX": "bench",
        "PYTHONPYCACHEPREFIX": str(data_dir / "pycache"),
    }
    times = []
    for i in range(-2, runs):  # two warm-up runs fill the bytecode cache
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-S", "-c", code, "hook", "claude-code"],
                              input=post_tool_use(i), env=env, cwd=tree, capture_output=True,
                              text=True, check=False)  # fmt: skip
        if done.returncode != 0 or done.stdout or done.stderr:
            raise SystemExit(f"hook run failed: {done.returncode} {done.stdout} {done.stderr}")
        if i >= 0:
            times.append(time.perf_counter() - started)
    return percentile(times, 50) * 1000, percentile(times, 99) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, help="another checkout to compare with")
    args = parser.parse_args()
    trees = {"after": REPO, **({"before": args.before.resolve()} if args.before else {})}
    with tempfile.TemporaryDirectory(prefix="mqredact") as tmp:
        mix = realistic_mix()
        mb = sum(len(t.encode()) for t in mix) / 1e6
        mix_file = Path(tmp) / "mix.json"
        mix_file.write_text(json.dumps(mix))
        results: dict[str, dict[str, float]] = {}
        for _ in range(2):  # interleaved; the best of two for each tree
            for name, tree in trees.items():
                now = measure(tree, mix_file)
                best = results.setdefault(name, now)
                results[name] = {k: min(best[k], now[k]) for k in now}
        counts, cases = coverage_cases()
        ordinary = [
            t for seed in range(COVERAGE_SEEDS) for t in ordinary_texts(random.Random(seed))
        ]
        data_file = Path(tmp) / "coverage.json"
        data_file.write_text(json.dumps({"cases": cases, "ordinary": ordinary}))
        covered = {name: coverage(tree, data_file) for name, tree in trees.items()}
        with private_redis(Path(tmp) / "redis") as server:
            hooks = {}
            for round_ in range(4):  # interleaved, order swapped, so load hits both alike
                for name, tree in list(trees.items())[:: 1 if round_ % 2 else -1]:
                    p50, p99 = hook_ms(tree, server.url, Path(tmp) / f"hook-{name}-{round_}")
                    hooks.setdefault(name, []).append((p50, p99))
    print(f"Machine: {machine()}; mix {mb:.1f} MB in {len(mix)} texts\n")
    print("| tree | `redact_secrets` MB/s | `prepare_event` per 2 KB call | hook p50 | hook p99 |")
    print("|---|---|---|---|---|")
    for name in trees:
        r = results[name]
        p50 = min(h[0] for h in hooks[name])
        p99 = min(h[1] for h in hooks[name])
        print(f"| {name} | {mb / r['redact_s']:.1f} | {r['prepare_us']:.0f} µs | "
              f"{p50:.0f} ms | {p99:.0f} ms |")  # fmt: skip
    shapes = ", ".join(SHAPES)
    print(f"\nSecrets that reach the wire bytes, of each family's cases ({COVERAGE_SEEDS} "
          f"random draws of every format, each in {len(SHAPES)} agent payload shapes: "
          f"{shapes})\n")  # fmt: skip
    print("| family | cases | " + " | ".join(f"{name}: reach the wire" for name in trees) + " |")
    print("|---|---|" + "---|" * len(trees))
    for family, count in counts.items():
        leaks = " | ".join(str(covered[name]["leaks"].get(family, 0)) for name in trees)
        print(f"| {family} | {count} | {leaks} |")
    kept = " | ".join(
        f"{covered[n]['kept']:,} of {covered[n]['total']:,} "
        f"({100 * covered[n]['kept'] / covered[n]['total']:.2f} %)"
        for n in trees
    )
    print(f"| ordinary developer text, tokens kept | {len(ordinary)} texts | {kept} |")


if __name__ == "__main__":
    main()
