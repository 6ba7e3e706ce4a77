"""``probewise lengths``: the length distribution, padding waste, a bucket sweep, CE chunks.

FILE holds one length per line, or JSONL records with a length field (``--field``)
and an optional source field (``--source-field``); with ``--tokenizer DIR`` it is a
JSONL of texts (``--text-field``) tokenized with that local tokenizer. Gzip is
detected by content.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, assert_never

from probewise.cli._sweep import add_input_arguments, load, parse_sweep, pct, print_sweep, run_sweep
from probewise.errors import InvalidInputError

if TYPE_CHECKING:
    from probewise.throughput.data.ce_chunks import ChunkPlan, LogitsDtype
    from probewise.throughput.data.length_input import LengthInput
    from probewise.throughput.data.lengths import LengthStats, PaddingReport

HELP = "length distribution, padding waste, bucket sweep and CE chunk plan"
DESCRIPTION = (
    "Before a job, from the data alone: the length distribution, the padding a "
    "batching wastes, a bucket-size sweep against random batches and HF-style "
    "grouping, and how to chunk the cross-entropy to fit a memory budget."
)
RAW_DESCRIPTION = False

_BAR_WIDTH = 40
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "kb": 10**3,
    "m": 1 << 20,
    "mib": 1 << 20,
    "mb": 10**6,
    "g": 1 << 30,
    "gib": 1 << 30,
    "gb": 10**9,
    "t": 1 << 40,
    "tib": 1 << 40,
    "tb": 10**12,
}


def parse_bytes(text: str) -> int:
    """``8GiB``, ``512 MiB``, ``2e9``, ``1.5G`` (K/M/G/T alone are binary) as bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InvalidInputError(
            f"cannot read {text!r} as a size: give bytes, or a number with KiB/MiB/GiB/TiB "
            "(binary), KB/MB/GB/TB (decimal)"
        )
    value = float(match.group(1)) * _UNITS[unit]
    if not math.isfinite(value) or value < 1:
        raise InvalidInputError(f"a size must be at least one byte, got {text!r}")
    return math.floor(value)


def _padding(args: argparse.Namespace, data: LengthInput) -> PaddingReport | None:
    from probewise.throughput.data.lengths import padding_waste

    if args.batch_size is not None:
        return padding_waste(data, batch_size=int(args.batch_size))
    if args.tokens_per_batch is not None:
        return padding_waste(data, tokens_per_batch=int(args.tokens_per_batch))
    if args.pack_to is not None:
        return padding_waste(data, pack_to=int(args.pack_to))
    return None


def _plan(
    args: argparse.Namespace,
    padding: PaddingReport | None,
    *,
    dtype: LogitsDtype,
    budget: int | None,
) -> ChunkPlan | None:
    if args.vocab is None and budget is None:
        return None
    if args.vocab is None or budget is None:
        raise InvalidInputError("a CE chunk plan needs both --vocab and --budget")
    from probewise.throughput.data.ce_chunks import ce_chunk_plan

    if args.ce_tokens is not None:
        tokens = int(args.ce_tokens)
    elif padding is not None:
        tokens = padding.largest_batch_slots
    else:
        raise InvalidInputError(
            "a CE chunk plan needs the tokens per step: give --ce-tokens, or a batching "
            "(--batch-size, --tokens-per-batch or --pack-to) whose largest batch is used"
        )
    return ce_chunk_plan(
        tokens,
        int(args.vocab),
        budget_bytes=budget,
        logits_dtype=dtype,
        bytes_per_logit=None if args.bytes_per_logit is None else float(args.bytes_per_logit),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace) -> int:
    from probewise.throughput.data.ce_chunks import LogitsDtype
    from probewise.throughput.data.lengths import LengthStats

    if args.sweep is not None and args.batch_size is None:
        raise InvalidInputError("--sweep needs --batch-size (the batch size to sweep at)")
    sizes = None if args.sweep is None else parse_sweep(str(args.sweep))
    # Parsed before the file is read, so that a typo fails at once.
    dtype = LogitsDtype.parse(str(args.logits_dtype))
    budget = None if args.budget is None else parse_bytes(str(args.budget))
    data = load(args)
    stats = LengthStats.of(data, bins_per_octave=int(args.bins_per_octave))
    padding = _padding(args, data)
    sweep = None if sizes is None else run_sweep(args, data, sizes)
    plan = _plan(args, padding, dtype=dtype, budget=budget)
    if args.plot is not None:
        from probewise.cli._plot import plot_lengths

        plot_lengths(Path(str(args.plot)), stats, sweep)
    if args.json:
        document: dict[str, object] = {
            "file": data.path,
            "sources": list(data.source_names) if data.source_codes is not None else None,
            "stats": stats.to_dict(),
            "padding": None if padding is None else padding.to_dict(),
            "sweep": None if sweep is None else sweep.to_dict(),
            "ce_plan": None if plan is None else plan.to_dict(),
        }
        print(json.dumps(document, indent=2, allow_nan=False))
        return 0
    _print_stats(data, stats)
    if padding is not None:
        _print_padding(padding)
    if sweep is not None:
        print_sweep(sweep)
    if plan is not None:
        _print_plan(plan)
    if args.plot is not None:
        print(f"\nplot written to {args.plot}")
    return 0


# ---------------------------------------------------------------------------------------
# Tables for people


def _size(n: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def _print_stats(data: LengthInput, stats: LengthStats) -> None:
    sources = f", {len(data.source_names)} sources" if data.source_codes is not None else ""
    print(f"{data.path}: {stats.count:,} sequences, {stats.total_tokens:,} tokens{sources}")
    print(
        f"  mean {stats.mean:,.1f}  std {stats.std:,.1f}  min {stats.min:,}  p50 {stats.p50:,.0f}"
        f"  p90 {stats.p90:,.0f}  p99 {stats.p99:,.0f}  max {stats.max:,}"
    )
    print("\nlength histogram (log-spaced bins)")
    peak = max(b.count for b in stats.histogram)
    width = len(f"{stats.histogram[-1].hi - 1:,}")
    for b in stats.histogram:
        bar = "#" * round(_BAR_WIDTH * b.count / peak) if peak else ""
        if b.count and not bar:
            bar = "."
        print(
            f"  {b.lo:>{width},} - {b.hi - 1:>{width},}  {bar:<{_BAR_WIDTH}}  {b.count:>10,}"
            f"  {pct(b.count / stats.count):>6}"
        )


def _print_padding(report: PaddingReport) -> None:
    from probewise.throughput.data.lengths import BatchingMode

    match report.mode:
        case BatchingMode.BATCH_SIZE:
            how = f"batches of {report.batch_size}, in file order"
        case BatchingMode.TOKEN_BUDGET:
            how = f"greedy batches of <= {report.tokens_per_batch} padded tokens, in file order"
        case BatchingMode.PACKED:
            how = f"packed into rows of {report.pack_to} tokens"
        case BatchingMode.EXPLICIT:
            how = "explicit batches"
        case _:
            assert_never(report.mode)
    print(f"\npadding ({how})")
    print(
        f"  batches {report.n_batches:,}  real tokens {report.real_tokens:,}  slots "
        f"{report.slot_tokens:,}  padding {report.pad_tokens:,}  waste {pct(report.waste_share)}"
    )
    print(
        f"  real tokens per batch {report.real_tokens_per_batch:,.0f}  largest batch "
        f"{report.largest_batch_slots:,} slots  attention real/slots {pct(report.attention_share)}"
    )
    if report.oversize:
        print(f"  {report.oversize:,} sequences exceed the budget (each batched alone)")
    if report.split_sequences:
        print(f"  {report.split_sequences:,} sequences cut across a row boundary")


def _print_plan(plan: ChunkPlan) -> None:
    source = "measured" if plan.bytes_per_logit_measured else "default, not measured"
    print(
        f"\nCE chunk plan (vocab {plan.vocab_size:,}, {plan.logits_dtype.value} logits, "
        f"{plan.bytes_per_logit:g} bytes per logit, {source})"
    )
    print(
        f"  tokens {plan.tokens:,}  logits {_size(plan.logits_bytes)}  unchunked peak "
        f"{_size(plan.peak_bytes_unchunked)}  budget {_size(plan.budget_bytes)}"
    )
    if plan.fits_unchunked:
        print("  fits unchunked")
    else:
        print(
            f"  chunk {plan.chunk_tokens:,} tokens x {plan.n_chunks:,} chunks "
            f"(peak {_size(plan.peak_bytes_chunked)})"
        )
