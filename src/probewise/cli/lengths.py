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
from typing import assert_never

from probewise.errors import InvalidInputError
from probewise.throughput.data.buckets import BucketRow, BucketSweep, sweep_buckets
from probewise.throughput.data.length_input import LengthInput, read_lengths, tokenize_lengths
from probewise.throughput.data.lengths import (
    BatchingMode,
    ChunkPlan,
    LengthStats,
    LogitsDtype,
    PaddingReport,
    ce_chunk_plan,
    padding_waste,
)

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


def _parse_sweep(text: str) -> list[int]:
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


def _load(args: argparse.Namespace) -> LengthInput:
    path = Path(str(args.file))  # missing, a FIFO or a folder: InputFileError from the reader
    source_field = None if args.source_field is None else str(args.source_field)
    if args.tokenizer is not None:
        return tokenize_lengths(
            path, str(args.tokenizer), text_field=str(args.text_field), source_field=source_field
        )
    return read_lengths(path, field=str(args.field), source_field=source_field)


def _padding(args: argparse.Namespace, data: LengthInput) -> PaddingReport | None:
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


def _run(args: argparse.Namespace) -> int:  # pyright: ignore[reportUnusedFunction]  # run by name (cli._args)
    if args.sweep is not None and args.batch_size is None:
        raise InvalidInputError("--sweep needs --batch-size (the batch size to sweep at)")
    sizes = None if args.sweep is None else _parse_sweep(str(args.sweep))
    # Parsed before the file is read, so that a typo fails at once.
    dtype = LogitsDtype.parse(str(args.logits_dtype))
    budget = None if args.budget is None else parse_bytes(str(args.budget))
    data = _load(args)
    stats = LengthStats.of(data, bins_per_octave=int(args.bins_per_octave))
    padding = _padding(args, data)
    sweep = (
        None
        if sizes is None
        else sweep_buckets(
            data, batch_size=int(args.batch_size), bucket_sizes=sizes, seed=int(args.seed)
        )
    )
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
        _print_sweep(sweep)
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


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _opt(x: float | None, fmt: str) -> str:
    return "-" if x is None or math.isnan(x) else format(x, fmt)


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
            f"  {_pct(b.count / stats.count):>6}"
        )


def _print_padding(report: PaddingReport) -> None:
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
        f"{report.slot_tokens:,}  padding {report.pad_tokens:,}  waste {_pct(report.waste_share)}"
    )
    print(
        f"  real tokens per batch {report.real_tokens_per_batch:,.0f}  largest batch "
        f"{report.largest_batch_slots:,} slots  attention real/slots {_pct(report.attention_share)}"
    )
    if report.oversize:
        print(f"  {report.oversize:,} sequences exceed the budget (each batched alone)")
    if report.split_sequences:
        print(f"  {report.split_sequences:,} sequences cut across a row boundary")


def _row_line(label: str, row: BucketRow) -> str:
    width = "-" if row.bucket_size is None else f"{row.bucket_size:,}"
    return (
        f"  {label:<15} {width:>7} {_pct(row.waste_share):>7} {_pct(row.full_batch_waste_share):>7}"
        f" {row.gain_vs_random:>6.2f}x {row.short_batches:>7,} {_opt(row.consecutive_length_corr, '+.2f'):>6}"
        f" {row.real_tokens_per_step:>11,.0f} {_opt(row.mean_sources_per_batch, '.2f'):>8}"
        f" {_opt(row.single_source_share, '.1%'):>7} {_opt(row.source_entropy_bits, '.2f'):>7}"
    )


def _print_sweep(sweep: BucketSweep) -> None:
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
        f"  least waste: width {best.bucket_size:,} ({_pct(best.waste_share)} waste, "
        f"{best.gain_vs_random:.2f}x fewer slots than random)"
    )
    print(
        "  full: waste over full batches only; short: batches under the batch size;\n"
        "  corr: correlation of consecutive batches' mean lengths; src/b, 1-src, H bits:\n"
        "  distinct sources per batch, single-source batches, mean source entropy"
    )


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


def run_sweep_only(args: argparse.Namespace) -> int:
    """``probewise buckets``: the sweep table (no stats, padding or CE plan in text mode)."""
    sizes = _parse_sweep(str(args.sweep))
    data = _load(args)
    sweep = sweep_buckets(
        data, batch_size=int(args.batch_size), bucket_sizes=sizes, seed=int(args.seed)
    )
    if args.plot is not None:
        from probewise.cli._plot import plot_lengths

        plot_lengths(Path(str(args.plot)), LengthStats.of(data), sweep)
    if args.json:
        print(json.dumps({"file": data.path, "sweep": sweep.to_dict()}, indent=2, allow_nan=False))
        return 0
    print(f"{data.path}: {len(data):,} sequences")
    _print_sweep(sweep)
    if args.plot is not None:
        print(f"\nplot written to {args.plot}")
    return 0
