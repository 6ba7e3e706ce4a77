"""``probewise preflight``: the checks worth running before every training job.

In order: the mask probe (are packed documents kept apart; which layers keep SDPA's
fast path), then the data-side probes (padding waste and truncation at the job's
batch shape, a bucket-size sweep). None needs weights or a GPU. With no arguments
it runs on embedded defaults: the bundled Gemma 3 27B-shaped config and a synthetic
length sample, so it works on a fresh machine.

Statuses: PASS; WARN (worth knowing, not wrong: e.g. a sliding-window layer whose
window is shorter than the sequence needs a mask, so it cannot use flash through
SDPA); FAIL (a correctness bug, or a fast path lost for nothing, or one the caller
said to expect). The exit status is 1 when any check fails.
"""

from __future__ import annotations

import argparse
import enum
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from probewise.cli._probe import add_scenario_arguments, compare_implementations, run_probe
from probewise.errors import InputFileError, InvalidInputError, SweepNoOpError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from probewise.throughput.attention.masks import LayerAttention, MaskReport

HELP = "the pre-launch checks: attention masks, padding, bucketing (no GPU)"
DESCRIPTION = (
    "Run the mask probe and the data-side probes for a job and print one page "
    "with a pass/warn/fail line per check. Exits 1 when a check fails. With no "
    "arguments: a bundled Gemma 3 27B-shaped config and a synthetic length sample."
)
RAW_DESCRIPTION = False

PREFLIGHT_CONFIG = "gemma3-27b"
"""``preflight``'s default config."""
SYNTHETIC_SEED = 0
SYNTHETIC_SIZE = 20_000
DEFAULT_WIDTHS = (64, 256, 1024, 4096)


@enum.unique
class Status(enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


class Check(NamedTuple):
    """One line of the page (and one object of ``--json``'s ``checks``, in this order)."""

    name: str
    status: Status
    detail: str
    figures: dict[str, object]


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def synthetic_lengths() -> npt.NDArray[np.int64]:
    """The embedded length sample: 20,000 log-normal lengths (median ~600), seed 0."""
    import numpy as np

    rng = np.random.default_rng(SYNTHETIC_SEED)
    raw = rng.lognormal(mean=6.4, sigma=0.9, size=SYNTHETIC_SIZE)
    return np.clip(np.rint(raw), 16, 32_768).astype(np.int64)


def _mask_checks(report: MaskReport, expect: list[str], loop: str = "plain") -> list[Check]:
    """The attention checks: packed documents kept apart (when rows pack documents),
    then the SDPA fast path; ``expect`` (``--expect-fast``) names the layer types that
    must keep it, ``loop`` (``--loop``) the training loop that runs the forward."""
    checks: list[Check] = []
    if report.scenario.documents:
        checks.append(_packing_check(report, loop))
    checks.append(_fast_path_check(report, _expected_types(report, expect)))
    return checks


LEAKING_LOOPS = (
    "a plain PyTorch loop, Accelerate or Lightning (they keep the config's use_cache) "
    "and a Trainer given TrainingArguments(use_cache=True) leak; a Trainer with the "
    "default TrainingArguments.use_cache=False keeps documents apart (--loop trainer)"
)
"""Which loops a cache leak happens in (transformers 5.x: the Trainer copies
``TrainingArguments.use_cache``, False by default, into ``config.use_cache``)."""


ALL_ONES_LOOPS = (
    "an all-ones attention mask stops transformers looking for packed documents in "
    "every loop, a default Trainer's included"
)


def _loop_fix(report: MaskReport, loop: str) -> str:
    """The fix for a leak, for the loop that runs the forward, and which loops leak."""
    from probewise.throughput.attention.masks import Packing

    all_ones = report.scenario.packing is Packing.ALL_ONES_MASK
    if not report.kv_cache:
        fix = report.packing_fix()
    elif loop == "trainer" and not all_ones:
        fix = (
            "the Trainer was given TrainingArguments(use_cache=True), which it copies into "
            "config.use_cache, so transformers skipped packed-sequence detection: leave "
            "TrainingArguments.use_cache at its default (False), or train with gradient "
            "checkpointing"
        )
    elif loop == "trainer":
        fix = f"{report.packing_fix()} (in a Trainer: TrainingArguments.use_cache=False)"
    else:
        fix = report.packing_fix()
    if all_ones:
        return f"{fix}. Loops: {ALL_ONES_LOOPS}"
    return f"{fix}. Loops: {LEAKING_LOOPS}" if report.kv_cache else fix


def _packing_check(report: MaskReport, loop: str = "plain") -> Check:
    """Whether every layer keeps the packed documents of a row apart."""
    from probewise.throughput.attention.masks import BandKind, layer_ranges

    crossing = report.cross_document_layers()
    if not crossing:
        detail = f"every layer keeps the {len(report.scenario.documents)} documents of a row apart"
        if loop == "trainer" and report.scenario.use_cache is False:
            detail += (
                " (the Trainer's TrainingArguments.use_cache=False turns the cache off; a "
                "plain loop keeping a config's use_cache=True would not)"
            )
        return Check(
            name="packed documents kept apart",
            status=Status.PASS,
            detail=detail,
            figures={"kv_cache": report.kv_cache},
        )
    how = sorted(
        {
            x.band.describe()
            if x.band.kind is not BandKind.NONE
            else f"no mask, is_causal={x.is_causal} over the whole row"
            for x in crossing
        }
    )
    return Check(
        name="packed documents kept apart",
        status=Status.FAIL,
        detail=(
            f"layers {layer_ranges([x.index for x in crossing])} let documents "
            f"attend to each other ({'; '.join(how)}). Fix: {_loop_fix(report, loop)}"
        ),
        figures={"layers": [x.index for x in crossing], "kv_cache": report.kv_cache},
    )


def _expected_types(report: MaskReport, expect: list[str]) -> set[str]:
    """The layer types ``--expect-fast`` names (``all``: every type of the model)."""
    expected = set(report.layer_types) if "all" in expect else set(expect)
    unknown = expected - set(report.layer_types)
    if unknown:
        raise InvalidInputError(
            f"--expect-fast {', '.join(sorted(unknown))}: this model has layer types "
            f"{', '.join(report.layer_types)}"
        )
    return expected


def _fast_path_check(report: MaskReport, expected: set[str]) -> Check:
    """Which layers keep SDPA's fast path; FAIL when one loses it for nothing (its mask
    is plain causal) or is of an expected type, WARN otherwise."""
    from probewise.throughput.attention.masks import layer_ranges

    lost = report.lost_fast_path()
    by_type: dict[str, list[int]] = {}
    for layer in lost:
        by_type.setdefault(layer.layer_type, []).append(layer.index)
    fast = len(report.layers) - len(lost)
    figures: dict[str, object] = {
        "layers": len(report.layers),
        "fast": fast,
        "lost": dict(by_type),
        "mask_bytes": report.mask_bytes,
    }
    sdpa = report.attn_implementation == "sdpa"
    name = "SDPA fast path" if sdpa else f"fused kernel ({report.attn_implementation})"
    if not lost:
        kernels = sorted(
            {x.backend.value if x.backend else x.kernel.implementation for x in report.layers}
        )
        return Check(
            name=name,
            status=Status.PASS,
            detail=f"all {len(report.layers)} layers: no dense mask, {', '.join(kernels)}",
            figures=figures,
        )
    needless = [x for x in lost if x.mask_redundant]
    required = [x for x in lost if x.layer_type in expected]
    status = Status.FAIL if needless or required else Status.WARN
    lead = f"{fast} of {len(report.layers)} layers keep it"
    if needless:
        lead += (
            f"; layers {layer_ranges([x.index for x in needless])} materialise a mask "
            "identical to plain causal (lost for nothing)"
        )
    return Check(
        name=name,
        status=status,
        detail=lead + ". " + " | ".join(_lost_by_type(report, lost, by_type)),
        figures=figures,
    )


def _lost_by_type(
    report: MaskReport, lost: Sequence[LayerAttention], by_type: dict[str, list[int]]
) -> list[str]:
    """Per layer type that lost the fast path: which layers, and why."""
    from probewise.throughput.attention.masks import layer_ranges

    parts: list[str] = []
    for layer_type, indices in by_type.items():
        sample = next(x for x in lost if x.layer_type == layer_type)
        reasons = sample.lost_reasons()
        of_type = sum(1 for x in report.layers if x.layer_type == layer_type)
        which = (
            f"all {of_type} {layer_type} layers"
            if len(indices) == of_type
            else f"{layer_type} layers {layer_ranges(indices)}"
        )
        parts.append(f"{which}: {'; '.join(reasons) if reasons else '?'}")
    return parts


def _data_checks(
    lengths: npt.NDArray[np.int64], source: str, args: argparse.Namespace
) -> list[Check]:
    import numpy as np

    from probewise.throughput.data.buckets import sweep_buckets
    from probewise.throughput.data.lengths import padding_waste

    seq = int(args.seq)
    batch = int(args.batch)
    checks: list[Check] = []
    longer = int(np.count_nonzero(lengths > seq))
    checks.append(
        Check(
            name="truncation",
            status=Status.WARN if longer else Status.PASS,
            detail=(
                f"{longer:,} of {lengths.size:,} sequences ({longer / lengths.size:.1%}) are longer "
                f"than --seq {seq} ({source})"
            ),
            figures={"longer": longer, "n": int(lengths.size), "seq": seq},
        )
    )
    clipped = np.minimum(lengths, seq)
    if args.packed is not None:
        report = padding_waste(clipped, pack_to=seq)
        what = f"packed into rows of {seq}"
    else:
        report = padding_waste(clipped, batch_size=batch)
        what = f"batches of {batch} in the given order"
    waste = report.waste_share
    max_waste = float(args.max_waste)
    checks.append(
        Check(
            name="padding waste",
            status=Status.WARN if waste > max_waste else Status.PASS,
            detail=f"{waste:.1%} of token slots are padding, {what} (warn above {max_waste:.0%})",
            figures={"waste_share": waste, "efficiency": report.efficiency},
        )
    )
    widths = [w for w in DEFAULT_WIDTHS if w < seq] or [seq]
    try:
        sweep = sweep_buckets(clipped, batch_size=batch, bucket_sizes=widths)
    except SweepNoOpError as error:
        checks.append(Check(name="bucket sweep", status=Status.FAIL, detail=str(error), figures={}))
        return checks
    best = sweep.best()
    checks.append(
        Check(
            name="bucket sweep",
            status=Status.PASS,
            detail=(
                f"random batches waste {sweep.random.waste_share:.1%}; bucket width "
                f"{best.bucket_size} wastes {best.waste_share:.1%} "
                f"({best.gain_vs_random:.2f}x real tokens per step); widths {','.join(map(str, widths))}"
            ),
            figures={
                "random_waste": sweep.random.waste_share,
                "best_width": best.bucket_size,
                "best_waste": best.waste_share,
                "gain_vs_random": best.gain_vs_random,
            },
        )
    )
    return checks


def _check_inputs(args: argparse.Namespace) -> None:
    """The input paths, before the (slow) mask probe runs: one line each, exit 2."""
    if args.tokenizer is not None:
        if args.lengths is None:
            raise InvalidInputError("--tokenizer needs --lengths (a JSONL of texts)")
        folder = Path(str(args.tokenizer))
        if not folder.is_dir():
            raise InvalidInputError(f"--tokenizer: no such folder: {folder}")
    if args.lengths is not None:
        path = Path(str(args.lengths))
        if not path.exists():
            raise InvalidInputError(f"no such file: {args.lengths}")
        if not path.is_file():  # /dev/zero, a FIFO, a folder: refused, never read
            raise InputFileError(
                "not a regular file (a device, a FIFO or a folder)", path=str(path)
            )


def _load_lengths(args: argparse.Namespace) -> tuple[npt.NDArray[np.int64], str]:
    import numpy as np

    if args.lengths is None:
        return synthetic_lengths(), f"synthetic sample of {SYNTHETIC_SIZE:,}"
    from probewise.throughput.data.length_input import read_lengths, tokenize_lengths

    path = Path(str(args.lengths))
    if args.tokenizer is not None:
        data = tokenize_lengths(path, str(args.tokenizer), text_field=str(args.text_field))
        return np.asarray(data.lengths, dtype=np.int64), f"{path}, tokenized"
    data = read_lengths(path, field=str(args.field))
    return np.asarray(data.lengths, dtype=np.int64), str(path)


def run(args: argparse.Namespace) -> int:
    from probewise import _json
    from probewise.cli._tables import (
        forward_description,
        implementation_row,
        print_implementation_table,
        print_mask_table,
    )

    if not 0.0 <= float(args.max_waste) <= 1.0:
        raise InvalidInputError(f"--max-waste must be in [0, 1], got {args.max_waste}")
    _check_inputs(args)
    report = run_probe(str(args.config), args)
    compared = compare_implementations(str(args.config), args)
    loop = str(args.loop)
    checks = [
        _with_section("attention", c) for c in _mask_checks(report, list(args.expect_fast), loop)
    ]
    lengths, source = _load_lengths(args)
    checks.extend(_with_section("data", c) for c in _data_checks(lengths, source, args))
    failed = any(c.status is Status.FAIL for c in checks)
    if args.json:
        document: dict[str, object] = {
            "passed": not failed,
            "config": str(args.config),
            "loop": loop,
            "lengths": source,
            "checks": [_json.unstructure(c) for c in checks],
            "masks": report.to_dict(),
        }
        if compared:
            document["implementations"] = {
                name: implementation_row(other) for name, other in compared
            }
        print(json.dumps(document, indent=2, allow_nan=False))
    else:
        print(
            f"probewise preflight: {args.config} ({report.architecture}, "
            f"{report.attn_implementation}), {report.scenario.describe()}, {report.dtype.value}, "
            f"sm{report.capability[0]}{report.capability[1]}; lengths: {source}"
        )
        print(f"forward: {_loop_words(report, loop)}{forward_description(report)}")
        print()
        for check in checks:
            print(f"{check.status.value.upper():<5} {check.name:<32} {check.detail}")
        if args.table:
            print()
            print_mask_table(report)
        if compared:
            print()
            print_implementation_table(compared)
        print()
        print("FAILED" if failed else "passed (warnings are worth a look, not errors)")
    return 1 if failed else 0


def _loop_words(report: MaskReport, loop: str) -> str:
    """What ``--loop trainer`` adds to the ``forward:`` line."""
    if loop != "trainer":
        return ""
    value = report.scenario.use_cache
    return f"a Trainer's (TrainingArguments.use_cache={value} copied into the config), "


def _with_section(section: str, check: Check) -> Check:
    return check._replace(name=f"{section}: {check.name}")
