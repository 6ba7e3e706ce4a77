"""The ``probewise`` subcommands' parsers: names, help texts and arguments.

This module imports nothing but the standard library, so that ``probewise --help``
and ``probewise CMD --help`` are answered without importing the modules that run the
commands (numpy, scipy, torch, ...). Each :class:`Command` names the module and the
function ``(argparse.Namespace) -> int`` that runs it; :mod:`probewise.cli` imports
that module when the command is run, not before.

It also reads back the argument groups that several commands share (the mask probe's
scenario options: :func:`scenario_from_args`, :func:`run_probe`), so that no command
module imports another; those functions import the mask probe when they are called.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from probewise.errors import InvalidInputError

if TYPE_CHECKING:
    from probewise.throughput.attention.masks import MaskReport, MaskScenario

__all__ = ["COMMANDS", "Command"]


class Command(NamedTuple):
    """One subcommand, as :func:`probewise.cli.build_parser` registers it."""

    name: str
    help: str
    module: str
    """The module that runs the command: imported on dispatch only."""
    run: str
    """Its function ``(argparse.Namespace) -> int``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    description: str | None = None
    raw_description: bool = False
    """Keep the description's line breaks (a long text in paragraphs)."""


ARMS_DESCRIPTION = """``probewise arms``: one prompt set through two models behind OpenAI-compatible servers.

PROMPTS is a JSONL file of ``{"id": ..., "prompt": ...}`` records (ids are strings
or integers), or a text file with one prompt per line (ids are the 1-based line
numbers; blank lines are skipped). The format is JSONL when the first non-blank line
starts with ``{``.

Each arm's server comes from ``--a URL#MODEL`` / ``--b URL#MODEL``, or from one
``--url URL`` with ``--model-a`` and ``--model-b`` (the two can be mixed: an arm's URL
is its ``--a``/``--b`` URL or else ``--url``, its model the ``#MODEL`` part or else
``--model-a``/``--model-b``). URL is where the API lives, e.g.
``http://localhost:8000/v1``. An API key is read from the environment variable that
``--api-key-env`` names, never from the command line.

``--calibration FILE`` reads a :class:`~probewise.Calibration` saved as JSON
(``json.dumps(calibration.to_dict())``, from a sample of the same rubric's outcomes
against human labels) and also prints both arms' declined rates corrected for the
rubric's measured error, with their difference and its interval
(:meth:`~probewise.Calibration.compare`). A calibration that cannot correct (a rubric
no better than chance on it) is an error, exit 2, after the run.

Both arms run through :func:`~probewise.run_paired` with
:class:`~probewise.OpenAICompatibleGenerator`; it prints the tallies with Wilson
intervals, the control verdict and the exact McNemar test per bucket. Completions are
classified as they arrive and never written anywhere; ``--checkpoint PATH`` keeps
outcomes only (``PATH`` with ``.a``/``.b`` before the suffix) and a rerun of the same
command resumes from them. A checkpoint is bound to its run: a rerun with another
server, model, generation setting or prompt text under an id it holds is refused
(exit 2, naming what differs); delete the files to start fresh, or pass
``--resume-anyway`` to keep their outcomes. A second run on the same checkpoint at
once is refused too.

Exit status: 0 when the run completed, every prompt in both arms classified; 1 when
it did not: some prompts ended in the Error bucket (no usable answer from the server
after the retries; the report is printed, the Error rows say how many), or the run
was interrupted (nothing printed; the checkpoint keeps every finished batch); 2 for
bad input (one line on stderr).
"""

BUCKETS_DESCRIPTION = """``probewise buckets``: the bucket-size sweep alone (``probewise lengths --sweep`` in short).

The same input files as ``probewise lengths``; prints the sweep table (and, with
``--plot``, the histogram and the sweep). ``--sizes`` defaults to widths from 16 to
4,096 tokens in powers of two.
"""

DEMO_DESCRIPTION = """``probewise demo``: a two-arm run over built-in made-up completions, then a real one.

Part 1: completions invented for the demo; like real ones they are classified and
dropped, and only counts are printed. Part 2 (skip it with ``--no-model``): two
tiny Llama models built from a config with random weights (seeds 0 and 1) and a
word-level tokenizer built in code, nothing downloaded, generate for real over the
same made-up prompts through :class:`TransformersGenerator`; :func:`run_paired`
prints the paired result. Random weights say nothing about any real model: the
part shows the whole path, generation to paired test, running.
"""

_PACKING_CHOICES = ("position-ids", "all-ones-mask")
_USE_CACHE_CHOICES = ("config", "on", "off")
LOOP_CHOICES = ("plain", "trainer")
"""``--loop``: which training loop runs the forward (see :func:`scenario_from_args`)."""
FIT_LOSSES = ("linear", "soft_l1")
"""The values of :class:`probewise.throughput.FitLoss` (a test holds them equal)."""
PREFLIGHT_CONFIG = "gemma3-27b"
"""``preflight``'s default config."""
_DEFAULT_SIZES = "16,32,64,128,256,512,1024,2048,4096"


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


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """FILE and how to read it: the options ``lengths`` and ``buckets`` share (see ``probewise.cli.lengths._load``)."""
    parser.add_argument("file", metavar="FILE", help="lengths (one per line) or JSONL")
    parser.add_argument("--field", default="length", help="JSONL length field (length)")
    parser.add_argument("--source-field", metavar="S", help="JSONL field naming the source")
    parser.add_argument("--tokenizer", metavar="DIR", help="tokenize FILE's texts with this")
    parser.add_argument("--text-field", default="text", help="JSONL text field (text)")


def _preflight(parser: argparse.ArgumentParser) -> None:
    """``probewise preflight``."""
    parser.add_argument(
        "--config",
        default=PREFLIGHT_CONFIG,
        metavar="CONFIG",
        help=f"config.json, its folder, or a bundled name ({PREFLIGHT_CONFIG})",
    )
    parser.add_argument(
        "--lengths",
        metavar="FILE",
        help="the job's sequence lengths, one per line or JSONL (a synthetic sample)",
    )
    parser.add_argument("--field", default="length", help="JSONL length field (length)")
    parser.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="--lengths is a JSONL of texts: tokenize them with this local tokenizer folder",
    )
    parser.add_argument("--text-field", default="text", help="JSONL text field (text)")
    add_scenario_arguments(parser, seq_default=8192, batch_default=2)
    parser.add_argument(
        "--expect-fast",
        metavar="TYPE",
        action="append",
        default=[],
        help="fail unless layers of TYPE keep the fast path (repeatable; 'all')",
    )
    parser.add_argument(
        "--max-waste",
        type=float,
        default=0.25,
        metavar="SHARE",
        help="warn when padding wastes more than this share of the batch (0.25)",
    )
    parser.add_argument("--table", action="store_true", help="also print the per-layer mask table")
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")


def _masks(parser: argparse.ArgumentParser) -> None:
    """``probewise masks``."""
    parser.add_argument(
        "config", metavar="CONFIG", nargs="?", help="config.json, its folder, or a bundled name"
    )
    parser.add_argument("--list", action="store_true", help="list the bundled configs and exit")
    add_scenario_arguments(parser, seq_default=4096, batch_default=1)
    parser.add_argument(
        "--assert-fast",
        metavar="TYPE",
        action="append",
        help="fail unless layers of TYPE keep the fast path (repeatable; 'all' for every layer)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")


def _demo(parser: argparse.ArgumentParser) -> None:
    """``probewise demo``."""
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--no-model", action="store_true", help="skip part 2 (the tiny local models)"
    )


def _kernels(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace, directory or table")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="rows to show (20)")
    parser.add_argument("--by-kind", action="store_true", help="totals per kernel kind")
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument(
        "--salvage",
        action="store_true",
        help="read damaged traces up to the damage and report what was lost",
    )
    parser.add_argument(
        "--diff", metavar="OTHER", help="compare with OTHER (a trace, directory or table)"
    )
    parser.add_argument("--per-rank", action="store_true", help="one summary line per rank")
    parser.add_argument(
        "--allow-mixed-jobs",
        action="store_true",
        help=(
            "sum traces that disagree on world size or repeat a rank (refused by default: "
            "they come from different jobs); the output says which job each file came from"
        ),
    )
    parser.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        help=(
            "read each trace file as a task on this Dask cluster (tcp://HOST:PORT; the "
            "paths must be the same files on every worker) and merge here; needs "
            "probewise[dask]"
        ),
    )


def _lengths(parser: argparse.ArgumentParser) -> None:
    """``probewise lengths``."""
    add_input_arguments(parser)
    batching = parser.add_mutually_exclusive_group()
    batching.add_argument("--batch-size", type=int, metavar="N", help="N sequences per batch")
    batching.add_argument(
        "--tokens-per-batch", type=int, metavar="T", help="greedy batches of <= T padded tokens"
    )
    batching.add_argument("--pack-to", type=int, metavar="T", help="pack into rows of T tokens")
    parser.add_argument(
        "--sweep",
        metavar="W,W,...",
        help="bucket widths in tokens to sweep (needs --batch-size), e.g. 64,256,1024,4096",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sweep's shuffles (0)")
    parser.add_argument("--vocab", type=int, metavar="V", help="vocabulary size, for a CE plan")
    parser.add_argument(
        "--budget", metavar="BYTES", help="CE memory budget, e.g. 8GiB, 512MiB, 2e9 (with --vocab)"
    )
    parser.add_argument(
        "--logits-dtype",
        default="bf16",
        help="dtype of the logits: bf16, fp16, fp32 (bf16)",
    )
    parser.add_argument(
        "--bytes-per-logit",
        type=float,
        metavar="X",
        help="your loss's peak bytes per logit element (measure_bytes_per_logit)",
    )
    parser.add_argument(
        "--ce-tokens",
        type=int,
        metavar="N",
        help="tokens per step for the CE plan (default: the batching's largest batch)",
    )
    parser.add_argument(
        "--bins-per-octave", type=int, default=2, metavar="K", help="histogram bins (2)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument(
        "--plot", metavar="OUT.png", help="write a PNG of the histogram and the sweep (matplotlib)"
    )


def _buckets(parser: argparse.ArgumentParser) -> None:
    """``probewise buckets``."""
    add_input_arguments(parser)
    parser.add_argument("--batch-size", type=int, required=True, metavar="N", help="batch size")
    parser.add_argument(
        "--sizes", dest="sweep", default=_DEFAULT_SIZES, metavar="W,W,...", help="bucket widths"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffles (0)")
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument("--plot", metavar="OUT.png", help="write a PNG (matplotlib)")


def _fit(parser: argparse.ArgumentParser) -> None:
    """``probewise fit``."""
    parser.add_argument(
        "points",
        nargs="+",
        metavar="POINT",
        help="LENGTH:SECONDS[:BATCH], or a CSV file of length,seconds[,batch]",
    )
    parser.add_argument("--batch", type=int, default=1, help="batch of points without one (1)")
    parser.add_argument(
        "--loss",
        choices=FIT_LOSSES,
        default=FIT_LOSSES[0],
        help="linear (least squares) or soft_l1 (robust to an outlier)",
    )
    parser.add_argument(
        "--at", type=int, metavar="L", help="length for the term shares (default: the largest)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument("--plot", metavar="OUT.png", help="write a PNG of the fit (matplotlib)")


def _arms(parser: argparse.ArgumentParser) -> None:
    """``probewise arms``."""
    parser.add_argument("prompts", type=Path, metavar="PROMPTS", help="JSONL or one prompt a line")
    parser.add_argument("--a", metavar="URL[#MODEL]", help="arm A's server (and model)")
    parser.add_argument("--b", metavar="URL[#MODEL]", help="arm B's server (and model)")
    parser.add_argument("--url", metavar="URL", help="the server of an arm that --a/--b leave out")
    parser.add_argument("--model-a", metavar="MODEL", help="arm A's model, if --a has no #MODEL")
    parser.add_argument("--model-b", metavar="MODEL", help="arm B's model, if --b has no #MODEL")
    parser.add_argument(
        "--max-tokens", type=int, default=256, metavar="N", help="tokens per completion (256)"
    )
    parser.add_argument(
        "--temperature", type=float, default=0.0, metavar="T", help="sampling temperature (0)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="requests in flight per arm (8)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds per attempt, from connecting to the last byte of the body (60)",
    )
    parser.add_argument(
        "--max-response-bytes",
        type=int,
        default=8 << 20,
        metavar="N",
        help="largest response body kept, before and after decompression (8 MiB); "
        "a larger one is an Error outcome",
    )
    parser.add_argument(
        "--retries", type=int, default=3, metavar="N", help="retries on 408/429/5xx/timeouts (3)"
    )
    parser.add_argument(
        "--stop-when-decided",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stream each reply and stop it once its outcome is decided (on: the outcome "
        "is the whole reply's; a server that does not stream sends whole replies)",
    )
    parser.add_argument(
        "--completions",
        action="store_true",
        help="POST /completions with the raw prompt instead of /chat/completions",
    )
    parser.add_argument("--system-prompt", metavar="TEXT", help="a system message for chat")
    parser.add_argument(
        "--api-key-env", metavar="VAR", help="the environment variable that holds the API key"
    )
    parser.add_argument(
        "--checkpoint", type=Path, metavar="PATH", help="outcomes file(s) to resume from"
    )
    parser.add_argument(
        "--resume-anyway",
        action="store_true",
        help="resume a checkpoint whose server, model, settings or prompts differ",
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        metavar="FILE",
        help="a Calibration saved as JSON (Calibration.to_dict): also print the declined "
        "rates corrected for the rubric's measured error",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


CALIBRATE_DESCRIPTION = """``probewise calibrate``: the rubric's measured error on rows a person labelled.

LABELS is a JSONL file, one row a line: ``{"text": "...", "label": "complied"}``,
the label one of ``complied``, ``declined`` (a decline of any kind), ``refused`` or
``deflected`` (:class:`~probewise.HumanLabel`), and optionally ``"finish_reason"``:
``stop`` (the default), ``length`` or ``content_filter``. Each text is classified
with the default rubric, or with ``--rubric MODULE:NAME`` (a
:class:`~probewise.Rubric`, or a function that returns one, imported with the current
directory on the path).

It prints the counts (rubric bucket by human label), sensitivity and specificity per
label with Wilson intervals, and how many rows to label: for each row count (``--rows``,
and the rows given), the expected interval widths at the measured rates and the chance
that :meth:`~probewise.Calibration.correct` could not correct with such a sample. It
writes ``--out``: the counts only (:meth:`~probewise.Calibration.to_dict`), what
``probewise arms --calibration`` reads. No text of a row is printed or written, not
even in an error message.

Exit status: 0 when the file was written; 2 for bad input (one line on stderr).
"""


def _calibrate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("labels", type=Path, metavar="LABELS", help="JSONL: text and label")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="FILE", help="write the calibration here"
    )
    parser.add_argument(
        "--rubric", metavar="MODULE:NAME", help="a Rubric (or a function returning one)"
    )
    parser.add_argument("--rows", type=int, nargs="+", metavar="N", help="row counts to plan for")
    parser.add_argument(
        "--confidence", type=float, default=0.95, help="interval level (default 0.95)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


COMMANDS: tuple[Command, ...] = (
    Command(
        name="preflight",
        help="the pre-launch checks: attention masks, padding, bucketing (no GPU)",
        module="probewise.cli.preflight",
        run="_run",
        add_arguments=_preflight,
        description=(
            "Run the mask probe and the data-side probes for a job and print one page "
            "with a pass/warn/fail line per check. Exits 1 when a check fails. With no "
            "arguments: a bundled Gemma 3 27B-shaped config and a synthetic length sample."
        ),
    ),
    Command(
        name="masks",
        help="per-layer attention masks and predicted SDPA backends, from a config",
        module="probewise.cli.masks",
        run="_run",
        add_arguments=_masks,
        description=(
            "Build the transformers model for CONFIG (no weights, no GPU), run one "
            "forward on the scenario and print, per attention layer, the mask SDPA got, "
            "is_causal, the band structure, GQA handling and the CUDA backend it would "
            "use. Exits 1 when --assert-fast fails or packed documents attend across."
        ),
    ),
    Command(
        name="demo",
        help="two arms of built-in made-up completions: tallies, intervals, control verdict",
        module="probewise.cli.demo",
        run="run",
        add_arguments=_demo,
        description=DEMO_DESCRIPTION,
    ),
    Command(
        name="kernels",
        help="device kernel time from Chrome traces or printed key_averages() tables",
        module="probewise.cli.kernels",
        run="_run",
        add_arguments=_kernels,
        description=(
            "Sum device kernel time without double counting: kernels only, memcpy and "
            "memset apart, annotations / syncs / CPU ops excluded and counted. PATH is a "
            "trace (.json or gzip), a directory of rank traces, or a printed table (.txt)."
        ),
    ),
    Command(
        name="lengths",
        help="length distribution, padding waste, bucket sweep and CE chunk plan",
        module="probewise.cli.lengths",
        run="_run",
        add_arguments=_lengths,
        description=(
            "Before a job, from the data alone: the length distribution, the padding a "
            "batching wastes, a bucket-size sweep against random batches and HF-style "
            "grouping, and how to chunk the cross-entropy to fit a memory budget."
        ),
    ),
    Command(
        name="buckets",
        help="bucket-size sweep: waste, gain, sources, neighbour correlation per width",
        module="probewise.cli.lengths",
        run="run_sweep_only",
        add_arguments=_buckets,
        description=BUCKETS_DESCRIPTION,
    ),
    Command(
        name="fit",
        help="fit seconds = quadratic*b*L^2 + linear*b*L + fixed to timed steps",
        module="probewise.cli.fit",
        run="_run",
        add_arguments=_fit,
        description=(
            "Fit step time against sequence length with three terms (attention-like, "
            "per-token, fixed per step), non-negative, from three or more distinct lengths."
        ),
    ),
    Command(
        name="calibrate",
        help="measure the rubric's error on labelled rows; write a calibration for arms",
        module="probewise.cli.calibrate",
        run="run",
        add_arguments=_calibrate,
        description=CALIBRATE_DESCRIPTION,
        raw_description=True,
    ),
    Command(
        name="arms",
        help="run a prompt set through two models on OpenAI-compatible servers; compare",
        module="probewise.cli.arms",
        run="run",
        add_arguments=_arms,
        description=ARMS_DESCRIPTION,
        raw_description=True,
    ),
)
"""Every subcommand, in the order ``probewise --help`` lists them."""
