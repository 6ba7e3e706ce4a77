"""Tables and JSON documents that more than one command prints.

The commands of :mod:`probewise.cli` never import each other; what two of them render
the same way lives here: the mask probe's table (``masks``, ``preflight``; its JSON is
``MaskReport.to_dict()``) and a two-arm result's rows and JSON (``demo``, ``arms``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from probewise import _json
from probewise.responses.outcome import Complied, Deflected, Empty, Error, Refused
from probewise.throughput.attention.sdpa import MaskKind

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


def _ranges(indices: list[int]) -> str:
    from probewise.throughput.attention.masks import layer_ranges

    return layer_ranges(indices)


def _backend(layer: LayerAttention) -> str:
    """SDPA's predicted backend, or the implementation's kernel family."""
    if layer.backend is not None:
        return layer.backend.value
    name = layer.kernel.implementation
    if name.startswith("flash_attention_"):
        return "fa" + name.removeprefix("flash_attention_")
    return {"eager": "eager", "flex_attention": "flex"}.get(name, "hub")


def _bytes(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB" if n >= 1 << 20 else f"{n:,} B"


def _mib(n: int) -> str:
    return "-" if n == 0 else f"{n / (1 << 20):.1f}"


def print_mask_table(report: MaskReport) -> None:
    """The per-layer table for people; runs of identical layers are printed once."""
    print(
        f"{report.architecture} ({report.model_type}), {report.scenario.describe()}, "
        f"{report.dtype.value}, {report.attn_implementation}, predicted for "
        f"sm{report.capability[0]}{report.capability[1]} (transformers "
        f"{report.transformers_version})"
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
            f"{heads:<13} {_mib(layer.mask_bytes):>7}  {_backend(layer):<9} "
            f"{'yes' if layer.fast_path else 'NO'}"
        )
    if report.attn_implementation != "sdpa":
        print()
        paths: dict[str, list[int]] = {}
        for layer in report.layers:
            paths.setdefault(layer.kernel.description, []).append(layer.index)
        for description, indices in paths.items():
            print(f"layers {_ranges(indices)}: {description}")
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


def implementation_row(report: MaskReport | str) -> dict[str, object]:
    """One implementation's verdict, compactly (``--attn-implementation all``)."""
    if isinstance(report, str):
        return {"refused": report}
    dense = [x for x in report.layers if x.call.mask is not MaskKind.NONE]
    return {
        "refused": None,
        "layers": len(report.layers),
        "cross_document_layers": len(report.cross_document_layers()),
        "packed": bool(report.scenario.documents),
        "dense_mask_layers": len(dense),
        "mask_bytes": report.mask_bytes,
        "fused_layers": sum(1 for x in report.layers if x.fast_path),
        "predicted": any(x.kernel.predicted and x.prediction is None for x in report.layers),
        "paths": sorted({x.kernel.description for x in report.layers}),
    }


def print_implementation_table(rows: list[tuple[str, MaskReport | str]]) -> None:
    """One row per implementation: documents apart, dense masks, fused layers, path."""
    header = f"{'implementation':<18} {'documents':<16} {'masks':<22} {'fused':<9} kernel path"
    print(header)
    print("-" * len(header))
    for name, report in rows:
        row = implementation_row(report)
        if row["refused"] is not None:
            print(f"{name:<18} refused: {row['refused']}")
            continue
        assert not isinstance(report, str)
        layers = len(report.layers)
        crossing = len(report.cross_document_layers())
        if not report.scenario.documents:
            documents = "not packed"
        else:
            documents = f"LEAK, {crossing} layers" if crossing else "kept apart"
        dense = f"{row['dense_mask_layers']}/{layers} dense, {_bytes(report.mask_bytes)}"
        fused = f"{row['fused_layers']}/{layers}"
        paths = cast("list[str]", row["paths"])
        path = paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} more)"
        print(f"{name:<18} {documents:<16} {dense:<22} {fused:<9} {path}")


def _same_row(a: LayerAttention, b: LayerAttention) -> bool:
    return (
        a.layer_type == b.layer_type
        and a.band == b.band
        and a.call == b.call
        and a.gqa == b.gqa
        and a.prediction == b.prediction
        and a.cross_document == b.cross_document
    )
