"""The one-line kernel path of a layer under each implementation (no torch here)."""

from __future__ import annotations

import numpy as np

from probewise.throughput.attention._band import Band, BandKind
from probewise.throughput.attention._paths import FlashCall, FlexBlocks, KernelPath
from probewise.throughput.attention._scenario import MaskScenario, Packing, Padding
from probewise.throughput.attention._sdpa_types import BackendPrediction, MaskKind, SdpaCall

__all__ = ["eager_path", "flash_path", "flex_path", "mib", "sdpa_path"]


def mib(n: int) -> str:
    """Bytes for people: MiB from 1 MiB up, bytes below."""
    if n >= 1 << 20:
        return f"{n / (1 << 20):,.1f} MiB"
    return f"{n:,} B"


def _scores(softcap: float | None, sinks: bool) -> str:
    parts: list[str] = []
    if softcap is not None:
        parts.append(f"logits soft-capped at {softcap:g}")
    if sinks:
        parts.append("attention sinks")
    return f"; {', '.join(parts)}" if parts else ""


def sdpa_path(
    call: SdpaCall, prediction: BackendPrediction, capability: tuple[int, int]
) -> KernelPath:
    """SDPA: the backend predicted for the call (the reasons are the prediction's)."""
    mask = "no mask" if call.mask is MaskKind.NONE else f"a {call.mask.value} mask"
    return KernelPath(
        implementation="sdpa",
        description=(
            f"sdpa: {prediction.backend.value} predicted for sm{capability[0]}{capability[1]}, "
            f"{mask}, is_causal={call.is_causal}"
        ),
        fused=call.mask is MaskKind.NONE and prediction.fast,
        predicted=True,
    )


def eager_path(band: Band, mask_bytes: int, softcap: float | None, sinks: bool) -> KernelPath:
    """eager: matmul and softmax over the dense additive mask transformers built."""
    if band.kind is BandKind.NONE:
        what = "no mask"
    else:
        what = f"a dense additive mask of {mib(mask_bytes)} ({band.describe()})"
    return KernelPath(
        implementation="eager",
        description=f"eager: unfused matmul + softmax over {what}{_scores(softcap, sinks)}",
        fused=False,
        predicted=False,
    )


def flex_path(
    band: Band, blocks: FlexBlocks | None, softcap: float | None, sinks: bool
) -> KernelPath:
    """flex_attention: the BlockMask's blocks, derived from the mask function."""
    if blocks is None:
        what = "no BlockMask"
    else:
        computed = blocks.full + blocks.partial
        what = (
            f"BlockMask of {mib(blocks.nbytes)} (derived, not built): {computed:,} of "
            f"{blocks.total:,} blocks of {blocks.block_size} computed ({blocks.full:,} full, "
            f"{blocks.partial:,} partial); mask_mod: {band.describe()}"
        )
    score = "" if softcap is None else f"; score_mod: soft-cap {softcap:g}"
    sink = "; attention sinks through the log-sum-exp" if sinks else ""
    return KernelPath(
        implementation="flex_attention",
        description=f"flex_attention: {what}{score}{sink}",
        fused=True,
        predicted=False,
        blocks=blocks,
    )


def _document_bounds(scenario: MaskScenario) -> set[int]:
    """Every document boundary of the flattened batch (row ``b`` starts at ``b x L``)."""
    row = np.cumsum(np.asarray((0, *scenario.documents), dtype=np.int64))
    return {int(b * scenario.seq_len + x) for b in range(scenario.batch) for x in row}


def flash_path(
    name: str, flash: FlashCall, sinks: bool, scenario: MaskScenario
) -> tuple[KernelPath, bool | None]:
    """FlashAttention: the kernel call transformers' helpers made (stand-in kernels),
    and whether packed documents attend each other (``None``: not packed)."""
    packed = scenario.packing is not Packing.NONE
    notes: list[str] = []
    if flash.varlen:
        source = (
            "the attention mask (padding removed)"
            if scenario.padding is not Padding.NONE
            else "position_ids"
        )
        text = f"varlen kernel over {len(flash.cu_seqlens) - 1} sequences from {source}"
        cross = not _document_bounds(scenario) <= set(flash.cu_seqlens) if packed else None
    else:
        text = f"one kernel over each whole row (causal={flash.causal})"
        cross = len(scenario.documents) > 1 if packed else None
        if packed and scenario.batch > 1:
            notes.append(
                "transformers reads packed position_ids for FlashAttention only in a batch "
                "of one row: flatten the batch to one row, or pass cu_seq_lens_q/k"
            )
        elif packed and scenario.packing is Packing.ALL_ONES_MASK:
            notes.append("the all-ones attention mask hides the packing")
    if flash.window is not None:
        text += f", sliding window {flash.window}"
    if flash.softcap is not None:
        text += f", logits soft-capped at {flash.softcap:g}"
    if sinks and not flash.sinks_passed:
        notes.append(
            "attention sinks dropped (this kernel takes none, so transformers passes none)"
        )
    elif sinks:
        notes.append("attention sinks passed")
    text = "; ".join([text, *notes])
    path = KernelPath(
        implementation=name,
        description=f"{name} (not run: predicted): {text}",
        fused=True,
        predicted=True,
    )
    return path, cross
