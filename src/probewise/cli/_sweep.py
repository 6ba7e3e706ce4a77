"""The bucket-size sweep as ``lengths --sweep`` and ``buckets`` run it: FILE and how to
read it, the widths, the sweep and its table.

``buckets`` is the sweep alone; ``lengths`` adds the stats, the padding and the CE plan.
So neither command module imports the other. Only the standard library is imported at
the top: the data probes (numpy) are imported when a function here is called.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from probewise.errors import InvalidInputError

if TYPE_CHECKING:
    from probewise.throughput.data.buckets import BucketRow, BucketSweep
    from probewise.throughput.data.length_input import LengthInput


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """FILE and how to read it (see :func:`load`)."""
    parser.add_argument("file", metavar="FILE", help="lengths (one per line) or JSONL")
    parser.add_argument("--field", default="length", help="JSONL length field (length)")
    parser.add_argument("--source-field", metavar="S", help="JSONL field naming the source")
    parser.add_argument("--tokenizer", metavar="DIR", help="tokenize FILE's texts with this")
    parser.add_argument("--text-field", default="text", help="JSONL text field (text)")


def parse_sweep(text: str) -> list[int]:
    """The bucket widths of ``--sweep`` (``--sizes`` for ``buckets``)."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise InvalidInputError(
            f"--sweep takes comma-separated bucket widths in tokens, got {shown!r}"
        ) from None
    if not sizes:
        raise InvalidInputError("--sweep needs at least one bucket width")
    return sizes


def load(args: argparse.Namespace) -> LengthInput:
    """FILE as the options of :func:`add_input_arguments` say."""
    from probewise.throughput.data.length_input import read_lengths, tokenize_lengths

    path = Path(str(args.file))  # missing, a FIFO or a folder: InputFileError from the reader
    source_field = None if args.source_field is None else str(args.source_field)
    if args.tokenizer is not None:
        return tokenize_lengths(
            path, str(args.tokenizer), text_field=str(args.text_field), source_field=source_field
        )
    return read_lengths(path, field=str(args.field), source_field=source_field)


def run_sweep(args: argparse.Namespace, data: LengthInput, sizes: list[int]) -> BucketSweep:
    """The sweep at ``--batch-size`` over ``sizes``, shuffled with ``--seed``."""
    from probewise.throughput.data.buckets import sweep_buckets

    return sweep_buckets(
        data, batch_size=int(args.batch_size), bucket_sizes=sizes, seed=int(args.seed)
    )


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _opt(x: float | None, fmt: str) -> str:
    return "-" if x is None or math.isnan(x) else format(x, fmt)


def _row_line(label: str, row: BucketRow) -> str:
    width = "-" if row.bucket_size is None else f"{row.bucket_size:,}"
    return (
        f"  {label:<15} {width:>7} {pct(row.waste_share):>7} {pct(row.full_batch_waste_share):>7}"
        f" {row.gain_vs_random:>6.2f}x {row.short_batches:>7,} {_opt(row.consecutive_length_corr, '+.2f'):>6}"
        f" {row.real_tokens_per_step:>11,.0f} {_opt(row.mean_sources_per_batch, '.2f'):>8}"
        f" {_opt(row.single_source_share, '.1%'):>7} {_opt(row.source_entropy_bits, '.2f'):>7}"
    )


def print_sweep(sweep: BucketSweep) -> None:
    print(f"\nbucket sweep (batch size {sweep.batch_size}, seed {sweep.seed})")
    print(
        f"  {'strategy':<15} {'width':>7} {'waste':>7} {'full':>7} {'gain':>7} {'short':>7}"
        f" {'corr':>6} {'tokens/step':>11} {'src/b':>8} {'1-src':>7} {'H bits':>7}"
    )
    print(_row_line("random", sweep.random))
    print(_row_line("megabatch (HF)", sweep.megabatch))
    for row in sweep.rows:
        print(_row_line("length buckets", row))
    best = sweep.best()
    print(
        f"  least waste: width {best.bucket_size:,} ({pct(best.waste_share)} waste, "
        f"{best.gain_vs_random:.2f}x fewer slots than random)"
    )
    print(
        "  full: waste over full batches only; short: batches under the batch size;\n"
        "  corr: correlation of consecutive batches' mean lengths; src/b, 1-src, H bits:\n"
        "  distinct sources per batch, single-source batches, mean source entropy"
    )
