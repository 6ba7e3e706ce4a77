"""Benchmark ``probewise.classify`` against a naive substring baseline.

Usage::

    python benchmarks/classify.py [--n N] [--seed SEED] [--rounds R] [--json] [--no-later]

Generates ``N`` synthetic completions of about 1 KB each (invented fragments only, no
real model text) in a realistic mix: ~60% compliant prose (curly quotes, non-ASCII),
~20% opening with a refusal, ~15% opening with a deflection and ~5% other. Then times,
interleaved over several rounds, ``probewise.classify(text, rubric)`` and a naive
``any(p in text.lower() for p in REFUSAL_PREFIXES)`` check, and reports the best round
of each, and the ratio in each round (median and range: the spread). Completion text
is never printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING

import probewise

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

TARGET_CHARS = 1000

COMPLIANT_OPENERS: tuple[str, ...] = (
    "Sure — here’s a short overview of how the flimber valve works.",
    "Great question! The quorvel pattern has three moving parts.",
    "Here is a step-by-step outline for setting up the zantrix board.",
    "The short answer is yes: the plimsoll grid tolerates “soft” inputs.",
    "Let’s walk through the café-style layout for the dashboard.",
    "Happy to help. The naïve approach works, but there’s a faster one.",
    "Below is a summary of the trade-offs between the two brindle modes.",
    "In brief, the vortan index rises when the sample count doubles.",
)

REFUSAL_OPENERS: tuple[str, ...] = (
    "I'm sorry, but I can't help with that.",
    "I’m sorry, but I can’t help with that request.",
    "I cannot assist with this request.",
    "I won't be able to help with that.",
    "Sorry, I can't provide that information.",
    "As an AI, I am unable to do that.",
    "I must decline to help with this.",
    "Unfortunately, I can’t assist with that.",
)

DEFLECTION_OPENERS: tuple[str, ...] = (
    "I'd recommend speaking with a professional about this.",
    "How about we talk about something else?",
    "It might be best to consult a qualified expert on this topic.",
    "Perhaps we could focus on a different question instead.",
    "You may want to reach out to a specialist who can advise you.",
    "That’s a great topic for a licensed advisor — have you tried one?",
)

OTHER_OPENERS: tuple[str, ...] = (
    '```\n{ "status": "ok", "items": [1, 2, 3] }\n```',
    "1. Quorvel\n2. Flimber\n3. Zantrix",
    "Übersicht: Die Brindle-Einstellung ist aktiv.",
    "…",
    "Q: What is a plimsoll grid?\nA: A made-up lattice.",
    "Résumé — ça dépend du contexte.",
)

FILLER: tuple[str, ...] = (
    "The flimber valve opens when the pressure crosses a soft threshold.",
    "Each quorvel node keeps a small buffer of recent readings.",
    "In practice, the zantrix board draws very little power at idle.",
    "A “naïve” configuration still gives reasonable results for small inputs.",
    "The café dashboard groups related panels into tidy columns.",
    "You’ll notice the vortan index levels off after a few hundred samples.",
    "Brindle mode trades a little latency for much steadier output.",
    "The plimsoll grid is rebuilt whenever a new row is appended.",
    "Most users keep the default settings — they’re sensible for everyday work.",
    "For larger datasets, batching the updates keeps memory use predictable.",
    "The résumé export includes every field except the private notes.",
    "It’s worth checking the logs once a week to spot slow drifts.",
    "Temperature has only a mild effect on the flimber valve’s response.",
    "A second pass over the data usually removes the remaining outliers.",
    "The coördinator process hands out work in round-robin order.",
    "Think of the quorvel pattern as a relay: each stage passes its result on.",
)

REFUSAL_PREFIXES: tuple[str, ...] = (
    "i can't",
    "i cannot",
    "i can not",
    "i'm sorry",
    "i am sorry",
    "i'm unable",
    "i am unable",
    "as an ai",
    "i won't",
    "i will not",
    "i'm not able",
    "i am not able",
    "i must decline",
    "i have to decline",
    "i'm afraid i can't",
    "i apologize",
    "i apologise",
    "sorry, but",
    "sorry, i can't",
    "i'm not comfortable",
    "i am not comfortable",
    "i can't assist",
    "i cannot assist",
    "i can't help",
    "i cannot help",
    "i'm not going to",
    "i refuse",
    "against my guidelines",
    "not able to provide",
    "unable to assist",
)

# Cumulative mix: (upper bound of the uniform draw, opener pool, label).
MIX: tuple[tuple[float, tuple[str, ...], str], ...] = (
    (0.60, COMPLIANT_OPENERS, "compliant"),
    (0.80, REFUSAL_OPENERS, "refusal"),
    (0.95, DEFLECTION_OPENERS, "deflection"),
    (1.00, OTHER_OPENERS, "other"),
)


def make_completion(rng: random.Random) -> tuple[str, str]:
    """Return one synthetic completion of about ``TARGET_CHARS`` characters and its kind."""
    draw = rng.random()
    pool, kind = OTHER_OPENERS, "other"
    for bound, candidate, label in MIX:
        if draw < bound:
            pool, kind = candidate, label
            break
    parts = [rng.choice(pool)]
    length = len(parts[0])
    while length < TARGET_CHARS:
        sentence = rng.choice(FILLER)
        parts.append(sentence)
        length += len(sentence) + 1
    return " ".join(parts)[:TARGET_CHARS], kind


def make_completions(n: int, seed: int) -> tuple[list[str], Counter[str]]:
    """Generate ``n`` completions deterministically from ``seed``."""
    rng = random.Random(seed)
    texts: list[str] = []
    kinds: Counter[str] = Counter()
    for _ in range(n):
        text, kind = make_completion(rng)
        texts.append(text)
        kinds[kind] += 1
    return texts, kinds


def run_ours(texts: Sequence[str], rubric: probewise.Rubric) -> Counter[str]:
    classify = probewise.classify
    counts: Counter[str] = Counter()
    for text in texts:
        counts[type(classify(text, rubric)).__name__] += 1
    return counts


def run_naive(texts: Sequence[str]) -> int:
    prefixes = REFUSAL_PREFIXES
    hits = 0
    for text in texts:
        t = text.lower()
        if any(p in t for p in prefixes):
            hits += 1
    return hits


def time_once(fn: Callable[[], object]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of completions")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    parser.add_argument(
        "--later",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time Rubric.default() (the default); --no-later: Rubric.default(later=False)",
    )
    args = parser.parse_args(argv)
    n: int = args.n
    rounds: int = args.rounds
    if n <= 0 or rounds <= 0:
        parser.error("--n and --rounds must be positive")

    texts, kinds = make_completions(n, args.seed)
    rubric = probewise.Rubric.default(later=args.later)

    # Untimed warm-up pass, which also records the outcome counts.
    ours_counts = run_ours(texts, rubric)
    naive_hits = run_naive(texts)

    ours_times: list[float] = []
    naive_times: list[float] = []
    for _ in range(rounds):
        ours_times.append(time_once(lambda: run_ours(texts, rubric)))
        naive_times.append(time_once(lambda: run_naive(texts)))
    ours_best = min(ours_times)
    naive_best = min(naive_times)
    ours_rate = n / ours_best
    naive_rate = n / naive_best
    ratio = ours_rate / naive_rate
    # The spread: the ratio in each interleaved round (the two methods timed back to
    # back, so that a slow spell of a shared machine slows both).
    round_ratios = sorted(naive / ours for ours, naive in zip(ours_times, naive_times, strict=True))
    median_ratio = statistics.median(round_ratios)

    mean_chars = sum(len(t) for t in texts) / n
    result = {
        "n": n,
        "seed": args.seed,
        "rubric": "Rubric.default()" if args.later else "Rubric.default(later=False)",
        "rounds": rounds,
        "mean_chars": mean_chars,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "generated_mix": dict(sorted(kinds.items())),
        "methods": {
            "ours": {
                "completions_per_s": ours_rate,
                "us_per_completion": ours_best / n * 1e6,
                "round_seconds": ours_times,
                "outcomes": dict(sorted(ours_counts.items())),
            },
            "naive": {
                "completions_per_s": naive_rate,
                "us_per_completion": naive_best / n * 1e6,
                "round_seconds": naive_times,
                "hits": naive_hits,
                "misses": n - naive_hits,
            },
        },
        "ratio_ours_over_naive_throughput": ratio,
        "round_ratios": round_ratios,
        "median_round_ratio": median_ratio,
    }

    if args.json:
        print(json.dumps(result, indent=2))
        return 0

    print(
        f"N = {n:,} (mean {mean_chars:.0f} chars), seed {args.seed}, "
        f"best of {rounds} interleaved rounds"
    )
    print(f"Python {result['python']} ({result['implementation']}) on {result['platform']}")
    print()
    print("| method | completions/s | µs per completion | ratio (ours/naive throughput) |")
    print("|---|---:|---:|---:|")
    print(f"| probewise.classify | {ours_rate:,.0f} | {ours_best / n * 1e6:.2f} | {ratio:.3f} |")
    print(f"| naive substring | {naive_rate:,.0f} | {naive_best / n * 1e6:.2f} | 1.000 |")
    print()
    print(
        f"Ratio per round: median {median_ratio:.3f}, "
        f"range {round_ratios[0]:.3f} to {round_ratios[-1]:.3f} ({rounds} rounds)"
    )
    print("Generated mix: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    print("Ours outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(ours_counts.items())))
    print(f"Naive: {naive_hits} refusal hits, {n - naive_hits} non-hits (two-way only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
