"""Benchmark ``run_arm`` with a checkpoint against the same run without one.

Usage::

    python benchmarks/checkpoint.py [--n N] [--rounds R] [--batch-size B] [--json]

Runs ``N`` prompts (default 8,000) through a generator that returns invented
completions (a mix of answers, refusals, deflections and blanks; no real model
text) and classifies them with the default rubric, once without a checkpoint and
once with a fresh checkpoint file in a temporary folder on the same disk as this
repository, interleaved over ``R`` rounds (default 5). Reports each round's times,
the best and the median ratio (with / without), and the same for a run that
fsyncs after every batch (the journal's behaviour for batches slower than its
sync gap) for comparison. Completion text is never printed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Hashable
from pathlib import Path

from probewise import Completion, FinishReason, Rubric, run_arm
from probewise.responses import _journal as _checkpoint

TEXTS = (
    "Here is a short overview of how the flimber valve works. It has three parts.",
    "I'm sorry, but I can't help with that request.",
    "I'd recommend speaking with a qualified professional about this instead.",
    "Sure: step one, loosen the quorvel; step two, turn the zantrix dial.",
    "",
    "The short answer is yes: the plimsoll grid tolerates soft inputs.",
    "I won't be able to write that, but here is a related summary.",
)


class _Cycle:
    """A generator of invented completions, one per prompt, in a fixed cycle."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, prompt: str) -> Completion:
        self.calls += 1
        finish = FinishReason.LENGTH if self.calls % 11 == 0 else FinishReason.STOP
        return Completion(TEXTS[self.calls % len(TEXTS)], finish)


class _Batched(_Cycle):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.batch_size = size

    def generate_batch(self, prompts: list[str]) -> list[Completion]:
        return [self(p) for p in prompts]


def _run(n: int, batch: int, checkpoint: Path | None) -> float:
    prompts: dict[Hashable, str] = {f"p{i}": f"prompt {i}" for i in range(n)}
    generate = _Cycle() if batch == 1 else _Batched(batch)
    start = time.perf_counter()
    run_arm(prompts, generate, Rubric.default(), checkpoint=checkpoint, progress=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    where = Path(__file__).resolve().parent
    plain: list[float] = []
    journal: list[float] = []
    every: list[float] = []
    _run(200, args.batch_size, None)  # warm up (imports, the rubric)
    gap, factor = _checkpoint.SYNC_GAP, _checkpoint.SYNC_COST_FACTOR
    for _ in range(args.rounds):
        plain.append(_run(args.n, args.batch_size, None))
        with tempfile.TemporaryDirectory(dir=where) as folder:
            journal.append(_run(args.n, args.batch_size, Path(folder) / "arm.json"))
        with tempfile.TemporaryDirectory(dir=where) as folder:
            _checkpoint.SYNC_GAP, _checkpoint.SYNC_COST_FACTOR = 0.0, 0
            try:
                every.append(_run(args.n, args.batch_size, Path(folder) / "arm.json"))
            finally:
                _checkpoint.SYNC_GAP, _checkpoint.SYNC_COST_FACTOR = gap, factor
    ratios = [j / p for j, p in zip(journal, plain, strict=True)]
    every_ratios = [e / p for e, p in zip(every, plain, strict=True)]
    result = {
        "n": args.n,
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "python": platform.python_version(),
        "without_s": plain,
        "journal_s": journal,
        "fsync_every_batch_s": every,
        "ratio_best": min(journal) / min(plain),
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "fsync_every_batch_ratio_median": statistics.median(every_ratios),
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.n} prompts, batch size {args.batch_size}, {args.rounds} interleaved rounds")
    print(
        f"  without a checkpoint: best {min(plain):.3f} s, median {statistics.median(plain):.3f} s"
    )
    print(
        f"  with the journal:     best {min(journal):.3f} s, "
        f"median {statistics.median(journal):.3f} s"
    )
    print(
        f"  ratio: best/best {result['ratio_best']:.3f}, median of rounds "
        f"{result['ratio_median']:.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f})"
    )
    print(
        f"  fsync after every batch: median {statistics.median(every):.3f} s, "
        f"ratio {result['fsync_every_batch_ratio_median']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
