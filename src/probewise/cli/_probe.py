"""The mask probe as ``masks`` and ``preflight`` run it: the scenario options, read back, and the run.

Both commands take the same options for the batch the probe runs (:func:`add_scenario_arguments`);
:func:`run_probe` and :func:`compare_implementations` read them back and run the probe. So
no command module imports the other. Only the standard library is imported at the top: the
probe (transformers, torch) is imported when a function here is called.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probewise.errors import InvalidInputError

if TYPE_CHECKING:
    from probewise.throughput.attention.masks import MaskReport, MaskScenario

_PACKING_CHOICES = ("position-ids", "all-ones-mask")
_USE_CACHE_CHOICES = ("config", "on", "off")
LOOP_CHOICES = ("plain", "trainer")
"""``--loop``: which training loop runs the forward (see :func:`scenario_from_args`)."""


def add_scenario_arguments(
    parser: argparse.ArgumentParser, *, seq_default: int, batch_default: int
) -> None:
    """The batch the mask probe runs: shared by ``masks`` and ``preflight``."""
    parser.add_argument(
        "--seq", type=int, default=seq_default, metavar="L", help=f"tokens per row ({seq_default})"
    )
    parser.add_argument(
        "--batch", type=int, default=batch_default, metavar="B", help=f"rows ({batch_default})"
    )
    parser.add_argument(
        "--padding",
        choices=("none", "right", "left"),
        default="none",
        help="pad every row, on this side: row b keeps L - (b+1)*L/(2B) tokens (none)",
    )
    parser.add_argument(
        "--packed",
        nargs="?",
        const="position-ids",
        choices=_PACKING_CHOICES,
        metavar="HOW",
        help=(
            "rows pack several documents: marked by position-ids alone (the default), or "
            "by position ids plus an all-ones attention mask (all-ones-mask)"
        ),
    )
    parser.add_argument(
        "--documents",
        metavar="N,N,...",
        help="with --packed: the document lengths of each row (four equal ones)",
    )
    parser.add_argument(
        "--dtype", default="bf16", help="dtype the model runs in: bf16, fp16, fp32 (bf16)"
    )
    parser.add_argument(
        "--capability",
        default="9.0",
        metavar="X.Y",
        help="CUDA compute capability to predict for (9.0: H100/H200; 8.0: A100)",
    )
    parser.add_argument(
        "--inference", action="store_true", help="an inference forward, not a training step"
    )
    parser.add_argument(
        "--use-cache",
        choices=_USE_CACHE_CHOICES,
        default="config",
        help=(
            "use_cache in the forward: config (pass nothing, so the config's own value "
            "applies, as in a plain model(**batch)), on or off (config)"
        ),
    )
    parser.add_argument(
        "--loop",
        choices=LOOP_CHOICES,
        default="plain",
        help=(
            "the loop that runs the forward: plain (a PyTorch loop, Accelerate, Lightning: "
            "the config's use_cache applies) or trainer (transformers' Trainer, which copies "
            "TrainingArguments.use_cache, False by default, into the config; --use-cache "
            "then names TrainingArguments.use_cache) (plain)"
        ),
    )
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="the model has gradient checkpointing on (in training it turns the cache off)",
    )
    parser.add_argument(
        "--attn-implementation",
        metavar="NAME",
        help=(
            "the attention implementation the model runs: eager, sdpa, flex_attention, "
            "flash_attention_2, flash_attention_3 or a hub kernel (org/name); 'all' adds one "
            "row per implementation to compare (default: what the config would load)"
        ),
    )


_USE_CACHE: dict[str, bool | None] = {"config": None, "on": True, "off": False}
"""``--use-cache`` (one of ``_USE_CACHE_CHOICES``) as ``MaskScenario.use_cache``."""

_TRAINER_USE_CACHE: dict[str, bool] = {"config": False, "on": True, "off": False}
"""``--use-cache`` under ``--loop trainer``: ``TrainingArguments.use_cache`` (False by
default), which the Trainer copies into ``config.use_cache`` before training."""


def parse_capability(text: str) -> tuple[int, int]:
    """``"9.0"`` or ``"sm90"`` -> ``(9, 0)``."""
    cleaned = text.strip().lower().removeprefix("sm").removeprefix("_")
    major, dot, minor = cleaned.partition(".")
    if not dot and len(cleaned) >= 2:
        major, minor = cleaned[:-1], cleaned[-1]
    if not (major.isdigit() and minor.isdigit()):
        raise InvalidInputError(f"--capability takes X.Y (e.g. 9.0, 8.6) or smXY, got {text!r}")
    return int(major), int(minor)


def scenario_from_args(args: argparse.Namespace) -> MaskScenario:
    """The :class:`~probewise.throughput.attention.masks.MaskScenario` that the options of
    :func:`add_scenario_arguments` describe.

    Under ``--loop trainer`` the forward's ``use_cache`` is ``TrainingArguments.use_cache``
    (``--use-cache config``: its default, False): the Trainer writes it into
    ``config.use_cache`` before the first step, which the probe models by passing it."""
    import attrs

    from probewise.throughput.attention.masks import MaskScenario, Packing, Padding

    packing = Packing.NONE
    if args.packed == "position-ids":
        packing = Packing.POSITION_IDS
    elif args.packed == "all-ones-mask":
        packing = Packing.ALL_ONES_MASK
    documents: tuple[int, ...] = ()
    if args.documents is not None:
        if packing is Packing.NONE:
            raise InvalidInputError("--documents needs --packed")
        try:
            documents = tuple(int(p) for p in str(args.documents).split(",") if p.strip())
        except ValueError:
            raise InvalidInputError(
                f"--documents takes comma-separated lengths, got {args.documents!r}"
            ) from None
    padding = Padding(str(args.padding))
    if padding is not Padding.NONE and packing is not Packing.NONE:
        raise InvalidInputError("choose --padding or --packed, not both")
    scenario = MaskScenario(
        seq_len=int(args.seq),
        batch=int(args.batch),
        padding=padding,
        packing=packing,
        training=not args.inference,
        use_cache=(_TRAINER_USE_CACHE if args.loop == "trainer" else _USE_CACHE)[
            str(args.use_cache)
        ],
        gradient_checkpointing=bool(args.gradient_checkpointing),
        attn_implementation=None
        if args.attn_implementation in (None, "all")
        else str(args.attn_implementation),
    )
    return attrs.evolve(scenario, documents=documents) if documents else scenario


def run_probe(config: str, args: argparse.Namespace) -> MaskReport:
    """Run the mask probe on CONFIG as the scenario options say (``masks``, ``preflight``)."""
    from probewise.throughput.attention.masks import probe_masks

    return probe_masks(
        config,
        scenario_from_args(args),
        dtype=str(args.dtype),
        capability=parse_capability(str(args.capability)),
        progress=True,
    )


def compare_implementations(
    config: str, args: argparse.Namespace
) -> list[tuple[str, MaskReport | str]]:
    """With ``--attn-implementation all``: the probe under each implementation
    transformers names, or the one line it was refused with; empty otherwise."""
    if args.attn_implementation != "all":
        return []
    import attrs

    from probewise.errors import UnsupportedModelError
    from probewise.throughput.attention.masks import IMPLEMENTATIONS, probe_masks

    base = scenario_from_args(args)
    rows: list[tuple[str, MaskReport | str]] = []
    for name in IMPLEMENTATIONS:
        try:
            report = probe_masks(
                config,
                attrs.evolve(base, attn_implementation=name),
                dtype=str(args.dtype),
                capability=parse_capability(str(args.capability)),
            )
        except UnsupportedModelError as error:
            rows.append((name, str(error)))
        else:
            rows.append((name, report))
    return rows
