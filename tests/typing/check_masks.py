"""Checked-only typing tests of the mask probe and the SDPA predictor (never run by pytest).

Each ``# type: ignore[code]`` marks a negative case: when it stops being an error,
warn_unused_ignores / reportUnnecessaryTypeIgnoreComment fail.
"""

from __future__ import annotations

from typing import assert_never, assert_type

from probewise import MaskReport, MaskScenario, Packing, probe_masks
from probewise.throughput import (
    AttentionDtype,
    BackendPrediction,
    BackendRuling,
    Band,
    BandKind,
    GqaHandling,
    LayerAttention,
    MaskKind,
    Padding,
    SdpaBackend,
    SdpaCall,
    bundled_configs,
    predict_backend,
)


def band_words(band: Band) -> str:
    match band.kind:
        case BandKind.NONE:
            return "none"
        case BandKind.CAUSAL | BandKind.FULL:
            return "dense"
        case BandKind.SLIDING_WINDOW:
            assert_type(band.window, int | None)
            return "window"
        case BandKind.BLOCK_DIAGONAL:
            assert_type(band.segments, tuple[tuple[int, ...], ...])
            return "blocks"
        case BandKind.CHUNKED:
            assert_type(band.chunk_size, int | None)
            return "chunks"
        case BandKind.OTHER:
            return "other"
        case _:
            assert_never(band.kind)


def backend_words(backend: SdpaBackend) -> str:
    match backend:
        case SdpaBackend.FLASH | SdpaBackend.CUDNN:
            return "fast"
        case SdpaBackend.EFFICIENT:
            return "masked"
        case SdpaBackend.MATH:
            return "slow"
        case _:
            assert_never(backend)


def non_exhaustive(backend: SdpaBackend) -> str:
    match backend:
        case SdpaBackend.FLASH | SdpaBackend.CUDNN | SdpaBackend.EFFICIENT:
            return "some"
        case _:
            assert_never(backend)  # type: ignore[arg-type]  # MATH is not handled


def api() -> None:
    scenario = MaskScenario(seq_len=8192, batch=2, packing=Packing.POSITION_IDS)
    assert_type(scenario.documents, tuple[int, ...])
    assert_type(scenario.use_cache, bool | None)
    assert_type(scenario.gradient_checkpointing, bool)
    assert_type(MaskScenario(seq_len=8, padding=Padding.LEFT).lengths, tuple[int, ...])
    report = probe_masks("gemma3-27b", scenario, dtype="bfloat16", capability=(9, 0))
    assert_type(report, MaskReport)
    assert_type(report.layers, tuple[LayerAttention, ...])
    assert_type(report.dtype, AttentionDtype)
    assert_type(report.kv_cache, bool)
    assert_type(report.packing_fix(), str)
    layer = report.layers[0]
    assert_type(layer.band, Band)
    assert_type(layer.gqa, GqaHandling)
    assert_type(layer.mask, MaskKind)
    assert_type(layer.backend, SdpaBackend | None)
    assert_type(layer.kernel.fused, bool)
    assert_type(layer.cross_document, bool | None)
    assert_type(layer.lost_reasons(), tuple[str, ...])
    assert_type(report.lost_fast_path(layer_types=["full_attention"]), tuple[LayerAttention, ...])
    assert_type(report.assert_fast_path(), None)
    assert_type(bundled_configs(), tuple[str, ...])
    prediction = predict_backend(layer.call, capability=(8, 0))
    assert_type(prediction, BackendPrediction)
    assert_type(prediction.rulings, tuple[BackendRuling, ...])
    assert_type(prediction.ruling(SdpaBackend.FLASH).reasons, tuple[str, ...])
    assert_type(layer.call, SdpaCall)


def negatives() -> None:
    MaskScenario(8192)  # type: ignore[call-arg]  # keyword-only
    scenario = MaskScenario(seq_len=8)
    scenario.seq_len = 16  # type: ignore[misc]
    MaskScenario(seq_len=8, padding="right")  # type: ignore[arg-type]
    MaskScenario(seq_len=8.5)  # type: ignore[arg-type]
    MaskScenario(seq_len=8, use_cache="config")  # type: ignore[arg-type]
    probe_masks("gemma3-27b", scenario)  # type: ignore[call-arg]  # dtype is required
    probe_masks("gemma3-27b", scenario, dtype="bf16", capability=9.0)  # type: ignore[arg-type]
    report = probe_masks("gemma3-27b", scenario, dtype="bf16")
    report.layers = ()  # type: ignore[misc]
