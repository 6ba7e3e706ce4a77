"""Where the decision point decides, on the labelled sets (issue 33).

Usage::

    python benchmarks/decide_prefixes.py [--data DIR] [--step N] [--json]

For every reply of ``xstest-dev``, ``rbr-gold`` and ``gptfuzz-train`` (in ``DIR``,
``../shared/data/responses`` by default), with the default rubric: classify the whole
reply, then every prefix whose length is a multiple of ``N`` characters (8 by default,
about two tokens) and the reply itself, with
:func:`probewise.responses.decide.decided_outcome`. Counts: replies decided before
their end, decided prefixes whose outcome differs from the whole reply's (must be 0),
and the characters read up to the first decided prefix against the reply's length, by
set and by the whole reply's outcome. Completion text is never printed: ids and counts
only.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
from collections import Counter, defaultdict

from probewise import Rubric, classify
from probewise.responses.decide import decided_outcome

SETS = ("xstest-dev", "rbr-gold", "gptfuzz-train")


def _first_decided(text: str, step: int, rubric: Rubric) -> tuple[int, int]:
    """The length of the first decided prefix (``len(text)`` when none is) and the
    number of decided prefixes whose outcome is not the whole reply's."""
    whole = classify(text, rubric)
    first = len(text)
    wrong = 0
    ends = [*range(step, len(text), step), len(text)]
    for end in ends:
        outcome = decided_outcome(text[:end], rubric)
        if outcome is None:
            continue
        first = min(first, end)
        wrong += outcome != whole
    return first, wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/responses")
    parser.add_argument("--step", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rubric = Rubric.default()
    report: dict[str, object] = {"step": args.step}
    started = time.perf_counter()
    for name in SETS:
        path = pathlib.Path(args.data) / f"{name}.jsonl"
        rows = 0
        early = 0
        wrong = 0
        wrong_ids: list[str] = []
        read: Counter[str] = Counter()
        total: Counter[str] = Counter()
        replies: Counter[str] = Counter()
        decided_by: defaultdict[str, int] = defaultdict(int)
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            text = row["completion"]
            kind = type(classify(text, rubric)).__name__
            first, bad = _first_decided(text, args.step, rubric)
            del text
            rows += 1
            replies[kind] += 1
            read[kind] += first
            total[kind] += len(row["completion"])
            if first < len(row["completion"]):
                early += 1
                decided_by[kind] += 1
            if bad:
                wrong += bad
                wrong_ids.append(row["id"])
        report[name] = {
            "replies": rows,
            "decided_before_end": early,
            "wrong_decided_prefixes": wrong,
            "wrong_ids": wrong_ids,
            "chars_read_share": round(sum(read.values()) / max(1, sum(total.values())), 4),
            "by_outcome": {
                kind: {
                    "replies": replies[kind],
                    "decided_before_end": decided_by[kind],
                    "chars_read_share": round(read[kind] / max(1, total[kind]), 4),
                    "mean_chars": round(total[kind] / replies[kind], 1),
                    "mean_chars_read": round(read[kind] / replies[kind], 1),
                }
                for kind in sorted(replies)
            },
        }
    report["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name in SETS:
        print(name, json.dumps(report[name], indent=2))
    print("seconds", report["seconds"])


if __name__ == "__main__":
    main()
