"""``probewise masks CONFIG``: the per-layer SDPA table of the mask probe.

CONFIG is a ``config.json`` (or its folder) or the name of a bundled config
(``probewise masks --list``). The scenario options are shared with ``preflight``
(:mod:`probewise.cli._probe`), and so is the table (:mod:`probewise.cli._tables`).
"""

from __future__ import annotations

import argparse
import json

from probewise.cli._probe import add_scenario_arguments, compare_implementations, run_probe
from probewise.errors import CrossDocumentAttentionError, FastPathLostError, InvalidInputError

HELP = "per-layer attention masks and predicted SDPA backends, from a config"
DESCRIPTION = (
    "Build the transformers model for CONFIG (no weights, no GPU), run one "
    "forward on the scenario and print, per attention layer, the mask SDPA got, "
    "is_causal, the band structure, GQA handling and the CUDA backend it would "
    "use. Exits 1 when --assert-fast fails or packed documents attend across."
)
RAW_DESCRIPTION = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace) -> int:
    from probewise.cli._tables import (
        implementation_row,
        print_implementation_table,
        print_mask_table,
    )
    from probewise.throughput.attention.masks import bundled_configs

    if args.list:
        for name in bundled_configs():
            print(name)
        return 0
    if args.config is None:
        raise InvalidInputError("give CONFIG (a config.json, its folder, or a name from --list)")
    report = run_probe(str(args.config), args)
    compared = compare_implementations(str(args.config), args)
    failure: str | None = None
    try:
        if args.assert_fast:
            types = None if "all" in args.assert_fast else list(args.assert_fast)
            report.assert_fast_path(layer_types=types)
        else:
            report.assert_no_cross_document()
    except (FastPathLostError, CrossDocumentAttentionError) as error:
        failure = f"{type(error).__name__}: {error}"
    if args.json:
        document = report.to_dict()
        document["failure"] = failure
        if compared:
            document["implementations"] = {
                name: implementation_row(other) for name, other in compared
            }
        print(json.dumps(document, indent=2, allow_nan=False))
    else:
        print_mask_table(report)
        if compared:
            print()
            print_implementation_table(compared)
        if failure is not None:
            print()
            print(failure)
    return 1 if failure is not None else 0
