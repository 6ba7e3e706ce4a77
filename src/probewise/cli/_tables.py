"""Tables and JSON documents that more than one command prints.

The commands of :mod:`probewise.cli` never import each other; what two of them render
the same way lives here: the mask probe's table (``masks``, ``preflight``; its JSON is
``MaskReport.to_dict()``) and a two-arm result's rows and JSON (``demo``, ``arms``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from probewise import _json
from probewise.responses.outcome import Complied, Deflected, Empty, Error, Refused

if TYPE_CHECKING:
    from probewise.responses.arms import PairedResult
    from probewise.responses.stats import Bucket
    from probewise.throughput.attention.masks import LayerAttention, MaskReport

BUCKET_ROWS: tuple[tuple[str, Bucket, Literal["answered", "all"]], ...] = (
    ("complied", Complied, "answered"),
    ("deflected", Deflected, "answered"),
    ("refused", Refused, "answered"),
    ("empty", Empty, "all"),
    ("error", Error, "all"),
)
"""The rows of a two-arm table: bucket name, bucket, and what its rate is over."""


def paired_document(result: PairedResult) -> dict[str, object]:
    """A paired result as JSON (``demo``'s part 2, ``arms``): tallies, control, McNemar."""
    return {
        "tally_a": result.tally_a.to_dict(),
        "tally_b": result.tally_b.to_dict(),
        "control": result.control.to_dict(),
        "mcnemar": [_json.unstructure(m) for m in result.mcnemar],
    }


def forward_description(report: MaskReport) -> str:
    """Which forward ran, for people: mode, use_cache, checkpointing and whether a
    KV cache was built."""
    scenario = report.scenario
    use_cache = (
        "use_cache from the config"
        if scenario.use_cache is None
        else f"use_cache={scenario.use_cache}"
    )
    parts = [
        "training" if scenario.training else "inference",
        use_cache,
        f"gradient checkpointing {'on' if scenario.gradient_checkpointing else 'off'}",
        "a KV cache was built" if report.kv_cache else "no KV cache",
    ]
    return ", ".join(parts)


def _mib(n: int) -> str:
    return "-" if n == 0 else f"{n / (1 << 20):.1f}"


def print_mask_table(report: MaskReport) -> None:
    """The per-layer table for people; runs of identical layers are printed once."""
    print(
        f"{report.architecture} ({report.model_type}), {report.scenario.describe()}, "
        f"{report.dtype.value}, predicted for sm{report.capability[0]}{report.capability[1]} "
        f"(transformers {report.transformers_version})"
    )
    print(f"forward: {forward_description(report)}")
    header = (
        f"{'layers':<9} {'type':<18} {'mask':<8} {'causal':<6} {'band':<44} "
        f"{'gqa':<9} {'q/kv x dim':<13} {'MiB':>7}  {'backend':<9} fast"
    )
    print(header)
    print("-" * len(header))
    rows: list[tuple[list[int], LayerAttention]] = []
    for layer in report.layers:
        if rows and _same_row(rows[-1][1], layer) and rows[-1][0][-1] == layer.index - 1:
            rows[-1][0].append(layer.index)
        else:
            rows.append(([layer.index], layer))
    for indices, layer in rows:
        span = str(indices[0]) if len(indices) == 1 else f"{indices[0]}-{indices[-1]}"
        heads = f"{layer.call.query_heads}/{layer.kv_heads}x{layer.call.head_dim}"
        band = layer.band.describe()
        if len(band) > 44:
            band = band[:43] + "…"
        print(
            f"{span:<9} {layer.layer_type[:18]:<18} {layer.mask.value:<8} "
            f"{'yes' if layer.is_causal else 'no':<6} {band:<44} {layer.gqa.value:<9} "
            f"{heads:<13} {_mib(layer.mask_bytes):>7}  {layer.backend.value:<9} "
            f"{'yes' if layer.fast_path else 'NO'}"
        )
    lost = report.lost_fast_path()
    if lost:
        print()
        seen: set[tuple[str, ...]] = set()
        for layer in lost:
            reasons = layer.lost_reasons()
            if reasons in seen:
                continue
            seen.add(reasons)
            print(f"{layer.layer_type} (e.g. layer {layer.index}) lost the fast path:")
            for reason in reasons:
                print(f"  - {reason}")
    crossing = report.cross_document_layers()
    if crossing:
        print()
        print(
            f"CROSS-DOCUMENT ATTENTION in {len(crossing)} layers: packed documents see each other"
        )
        print(f"  fix: {report.packing_fix()}")


def _same_row(a: LayerAttention, b: LayerAttention) -> bool:
    return (
        a.layer_type == b.layer_type
        and a.band == b.band
        and a.call == b.call
        and a.gqa == b.gqa
        and a.prediction == b.prediction
        and a.cross_document == b.cross_document
    )
