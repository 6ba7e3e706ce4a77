"""``probewise buckets``: the bucket-size sweep alone (``DESCRIPTION`` is its ``--help``).

The input, the sweep and its table are ``lengths``' own, shared through
:mod:`probewise.cli._sweep`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from probewise.cli._sweep import add_input_arguments, load, parse_sweep, print_sweep, run_sweep

HELP = "bucket-size sweep: waste, gain, sources, neighbour correlation per width"
DESCRIPTION = """``probewise buckets``: the bucket-size sweep alone (``probewise lengths --sweep`` in short).

The same input files as ``probewise lengths``; prints the sweep table (and, with
``--plot``, the histogram and the sweep). ``--sizes`` defaults to widths from 16 to
4,096 tokens in powers of two.
"""
RAW_DESCRIPTION = False

_DEFAULT_SIZES = "16,32,64,128,256,512,1024,2048,4096"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument("--batch-size", type=int, required=True, metavar="N", help="batch size")
    parser.add_argument(
        "--sizes", dest="sweep", default=_DEFAULT_SIZES, metavar="W,W,...", help="bucket widths"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffles (0)")
    parser.add_argument("--json", action="store_true", help="one JSON document for machines")
    parser.add_argument("--plot", metavar="OUT.png", help="write a PNG (matplotlib)")


def run(args: argparse.Namespace) -> int:
    """The sweep table (no stats, padding or CE plan in text mode)."""
    sizes = parse_sweep(str(args.sweep))
    data = load(args)
    sweep = run_sweep(args, data, sizes)
    if args.plot is not None:
        from probewise.cli._plot import plot_lengths
        from probewise.throughput.data.lengths import LengthStats

        plot_lengths(Path(str(args.plot)), LengthStats.of(data), sweep)
    if args.json:
        print(json.dumps({"file": data.path, "sweep": sweep.to_dict()}, indent=2, allow_nan=False))
        return 0
    print(f"{data.path}: {len(data):,} sequences")
    print_sweep(sweep)
    if args.plot is not None:
        print(f"\nplot written to {args.plot}")
    return 0
