"""``probewise demo``: a two-arm run over built-in made-up completions, then a real one
(what it does: ``DESCRIPTION``, its ``--help``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from probewise._extras import Extra, requires

if TYPE_CHECKING:
    from probewise.responses.arms import PairedResult
    from probewise.responses.generators import TransformersGenerator
    from probewise.responses.stats import ArmTally

HELP = "two arms of built-in made-up completions: tallies, intervals, control verdict"
DESCRIPTION = """``probewise demo``: a two-arm run over built-in made-up completions, then a real one.

Part 1: completions invented for the demo; like real ones they are classified and
dropped, and only counts are printed. Part 2 (skip it with ``--no-model``): two
tiny Llama models built from a config with random weights (seeds 0 and 1) and a
word-level tokenizer built in code, nothing downloaded, generate for real over the
same made-up prompts through :class:`TransformersGenerator`; :func:`run_paired`
prints the paired result. Random weights say nothing about any real model: the
part shows the whole path, generation to paired test, running.
"""
RAW_DESCRIPTION = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--no-model", action="store_true", help="skip part 2 (the tiny local models)"
    )


# Made-up completions for two arms (e.g. a base and a tuned model), each with its
# finish reason (a FinishReason value). Arm B declines more, and part of its declining
# is by redirecting, with no refusal token.
_ARM_A: tuple[tuple[str, str], ...] = (
    ("Sure. Step one: preheat the oven to 200 degrees.", "stop"),
    ("Here is a short summary of the article you sent.", "stop"),
    ("I can't help with that request.", "stop"),
    ("The capital of the made-up country is Ostrava-by-the-sea.", "stop"),
    ("Of course! The function below sorts the list in place and", "length"),
    (
        "I'm sorry to hear that, here is what usually fixes it: restart the router.",
        "stop",
    ),
    ("Happy to help: the answer is 42.", "stop"),
    ("Sorry, but I won't write that.", "stop"),
    ("Absolutely. First, open the settings panel.", "stop"),
    ("  ", "stop"),
    ("Sure thing: the word you want is 'serendipity'.", "stop"),
    ("Here's a haiku: autumn wind / an empty street / one lamp on", "stop"),
)
_ARM_B: tuple[tuple[str, str], ...] = (
    ("I'm unable to assist with that.", "stop"),
    ("How about we talk about something more cheerful instead?", "stop"),
    ("Here is a short summary of the article you sent.", "stop"),
    ("I'd recommend speaking with a licensed professional about this.", "stop"),
    ("As an AI, I cannot provide that.", "stop"),
    ("Sure. Step one: preheat the oven to 200 degrees.", "stop"),
    ("Is there something else I can help you with?", "stop"),
    ("I must decline.", "stop"),
    ("Of course! The function below sorts the list in place and", "length"),
    ("Happy to help: the answer is 42.", "stop"),
    ("Instead, I can share a recipe for lemon cake.", "stop"),
    ("That request goes against my guidelines.", "stop"),
)


def _tally(arm: tuple[tuple[str, str], ...]) -> ArmTally:
    from probewise.responses.classifier import classify
    from probewise.responses.outcome import FinishReason
    from probewise.responses.sealed import Completion
    from probewise.responses.stats import ArmTally

    return ArmTally.of(classify(Completion(text, FinishReason(finish))) for text, finish in arm)


def run(args: argparse.Namespace) -> int:
    from probewise.cli._tables import BUCKET_ROWS, paired_document
    from probewise.responses.control import compare_arms

    a, b = _tally(_ARM_A), _tally(_ARM_B)
    verdict = compare_arms(a, b)
    if args.json:
        document: dict[str, object] = {
            "arm_a": a.to_dict(),
            "arm_b": b.to_dict(),
            "control": verdict.to_dict(),
        }
        if not args.no_model:
            document["local_models"] = paired_document(_local_models())
        print(json.dumps(document, indent=2, sort_keys=True))
        return 0
    print("probewise demo: two arms of made-up completions (texts are never shown)\n")
    header = f"{'bucket':<10} {'over':<9} {'arm A':<32} {'arm B':<32}"
    print(header)
    print("-" * len(header))
    for name, bucket, over in BUCKET_ROWS:
        ra = a.rate(bucket, over=over)
        rb = b.rate(bucket, over=over)
        print(f"{name:<10} {over:<9} {ra!s:<32} {rb!s:<32}")
    print(f"{'truncated':<10} {'all':<9} {f'{a.truncated}/{a.n}':<32} {f'{b.truncated}/{b.n}':<32}")
    print(f"\nintervals: Wilson score, 95%.  n: A = {a.n}, B = {b.n}")
    print(f"control: {verdict.state.value}: {verdict.summary()}")
    if not args.no_model:
        _print_paired(_local_models())
    return 0


# Made-up prompts for part 2, keyed by id; the ids are all a result ever names.
_PROMPTS = {
    f"q{i}": text
    for i, text in enumerate(
        (
            "please explain the answer",
            "help me with that",
            "what is the answer",
            "can you help",
            "tell me more",
            "is that the answer",
            "i need help with this",
            "say something else",
        )
    )
}
_WORDS = (
    "[EOS]",
    "[PAD]",
    "here",
    "is",
    "the",
    "answer",
    "i",
    "cannot",
    "can't",
    "help",
    "with",
    "that",
    "sorry",
    "instead",
    "recommend",
    "a",
    "professional",
    "please",
    "explain",
    "me",
    "what",
    "can",
    "you",
    "tell",
    "more",
    "need",
    "this",
    "say",
    "something",
    "else",
    "sure",
    "step",
    "one",
)


def _local_models() -> PairedResult:
    with requires(Extra.TORCH, "demo's part 2 (tiny local models; --no-model skips it)"):
        import torch
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from probewise.responses.arms import run_paired
    from probewise.responses.generators import TransformersGenerator

    core = Tokenizer(
        models.WordLevel(vocab={w: i for i, w in enumerate(_WORDS)}, unk_token="[PAD]")
    )
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    make: Callable[..., PreTrainedTokenizerFast] = PreTrainedTokenizerFast  # untyped __init__
    tokenizer = make(tokenizer_object=core, eos_token="[EOS]", pad_token="[PAD]")
    generators: list[TransformersGenerator] = []
    for seed in (0, 1):
        torch.manual_seed(seed)  # pyright: ignore[reportUnknownMemberType]  # untyped parameter
        config = LlamaConfig(
            vocab_size=len(_WORDS),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=64,
            eos_token_id=0,
            pad_token_id=1,
            bos_token_id=None,
        )
        model = LlamaForCausalLM(config)
        model.train(False)  # inference mode (eval() is untyped in this torch)
        generators.append(TransformersGenerator(model, tokenizer, max_new_tokens=8, batch_size=4))
    return run_paired(_PROMPTS, generators[0], generators[1], progress=False)


def _print_paired(result: PairedResult) -> None:
    a, b = result.tally_a, result.tally_b
    print(
        "\npart 2: two tiny local models (random weights, seeds 0 and 1; built from a config, "
        f"nothing downloaded) over the same {len(result.pairs)} made-up prompts"
    )
    header = (
        f"{'bucket':<10} {'arm A':>6} {'arm B':>6} {'only A':>7} {'only B':>7} {'McNemar p':>10}"
    )
    print(header)
    print("-" * len(header))
    counts = a.to_dict(), b.to_dict()
    for test in result.mcnemar:
        name = test.bucket.value
        print(
            f"{name:<10} {counts[0][name]:>6} {counts[1][name]:>6} {test.only_a:>7} "
            f"{test.only_b:>7} {test.p_value:>10.3g}"
        )
    print(f"{'truncated':<10} {a.truncated:>6} {b.truncated:>6}")
    print(f"control: {result.control.state.value}: {result.control.summary()}")
