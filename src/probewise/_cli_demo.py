"""``probewise demo``: a two-arm run over built-in made-up completions.

The completions are invented for the demo; like real ones they are classified and
dropped, and only counts are printed.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Literal

from probewise.responses.classify import Completion, classify
from probewise.responses.control import compare_arms
from probewise.responses.outcome import Complied, Deflected, Empty, Error, FinishReason, Refused
from probewise.responses.tally import ArmTally

if TYPE_CHECKING:
    from probewise.responses.tally import Bucket

# Made-up completions for two arms (e.g. a base and a tuned model). Arm B declines
# more, and part of its declining is by redirecting, with no refusal token.
_ARM_A: tuple[tuple[str, FinishReason], ...] = (
    ("Sure. Step one: preheat the oven to 200 degrees.", FinishReason.STOP),
    ("Here is a short summary of the article you sent.", FinishReason.STOP),
    ("I can't help with that request.", FinishReason.STOP),
    ("The capital of the made-up country is Ostrava-by-the-sea.", FinishReason.STOP),
    ("Of course! The function below sorts the list in place and", FinishReason.LENGTH),
    (
        "I'm sorry to hear that, here is what usually fixes it: restart the router.",
        FinishReason.STOP,
    ),
    ("Happy to help: the answer is 42.", FinishReason.STOP),
    ("Sorry, but I won't write that.", FinishReason.STOP),
    ("Absolutely. First, open the settings panel.", FinishReason.STOP),
    ("  ", FinishReason.STOP),
    ("Sure thing: the word you want is 'serendipity'.", FinishReason.STOP),
    ("Here's a haiku: autumn wind / an empty street / one lamp on", FinishReason.STOP),
)
_ARM_B: tuple[tuple[str, FinishReason], ...] = (
    ("I'm unable to assist with that.", FinishReason.STOP),
    ("How about we talk about something more cheerful instead?", FinishReason.STOP),
    ("Here is a short summary of the article you sent.", FinishReason.STOP),
    ("I'd recommend speaking with a licensed professional about this.", FinishReason.STOP),
    ("As an AI, I cannot provide that.", FinishReason.STOP),
    ("Sure. Step one: preheat the oven to 200 degrees.", FinishReason.STOP),
    ("Is there something else I can help you with?", FinishReason.STOP),
    ("I must decline.", FinishReason.STOP),
    ("Of course! The function below sorts the list in place and", FinishReason.LENGTH),
    ("Happy to help: the answer is 42.", FinishReason.STOP),
    ("Instead, I can share a recipe for lemon cake.", FinishReason.STOP),
    ("That request goes against my guidelines.", FinishReason.STOP),
)


def _tally(arm: tuple[tuple[str, FinishReason], ...]) -> ArmTally:
    return ArmTally.of(classify(Completion(text, finish)) for text, finish in arm)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="two arms of built-in made-up completions: tallies, intervals, control verdict",
        description=__doc__,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=run)


_ROWS: tuple[tuple[str, Bucket, Literal["answered", "all"]], ...] = (
    ("complied", Complied, "answered"),
    ("deflected", Deflected, "answered"),
    ("refused", Refused, "answered"),
    ("empty", Empty, "all"),
    ("error", Error, "all"),
)


def run(args: argparse.Namespace) -> int:
    a, b = _tally(_ARM_A), _tally(_ARM_B)
    verdict = compare_arms(a, b)
    if args.json:
        document = {"arm_a": a.to_dict(), "arm_b": b.to_dict(), "control": verdict.to_dict()}
        print(json.dumps(document, indent=2, sort_keys=True))
        return 0
    print("probewise demo: two arms of made-up completions (texts are never shown)\n")
    header = f"{'bucket':<10} {'over':<9} {'arm A':<32} {'arm B':<32}"
    print(header)
    print("-" * len(header))
    for name, bucket, over in _ROWS:
        ra = a.rate(bucket, over=over)
        rb = b.rate(bucket, over=over)
        print(f"{name:<10} {over:<9} {ra!s:<32} {rb!s:<32}")
    print(f"{'truncated':<10} {'all':<9} {f'{a.truncated}/{a.n}':<32} {f'{b.truncated}/{b.n}':<32}")
    print(f"\nintervals: Wilson score, 95%.  n: A = {a.n}, B = {b.n}")
    print(f"control: {verdict.state.value}: {verdict.summary()}")
    return 0
