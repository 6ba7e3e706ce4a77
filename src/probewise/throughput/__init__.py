"""The training-throughput half: where a training step's time went.

Attention masks and SDPA's fast path (``attention``), lengths, padding, CE chunks and
bucketing (``data``), step timing and the scaling fit (``timing``), and the kernel table
with its readers of saved profiler output (``kernels``, ``readers``). The everyday names
are also importable from :mod:`probewise`. Names load lazily (PEP 562): importing this
package imports none of its modules (no numpy, scipy or torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from probewise._lazy import LazyFace

if TYPE_CHECKING:
    from probewise.throughput._torch_dtype import (
        TorchDtype,
    )
    from probewise.throughput.attention.masks import (
        Band,
        BandKind,
        FlexBlocks,
        GqaHandling,
        KernelPath,
        LayerAttention,
        MaskReport,
        MaskScenario,
        Packing,
        Padding,
        bundled_configs,
        probe_masks,
    )
    from probewise.throughput.attention.sdpa import (
        AttentionDtype,
        BackendPrediction,
        BackendRuling,
        MaskKind,
        SdpaBackend,
        SdpaCall,
        SdpaEnvironment,
        predict_backend,
    )
    from probewise.throughput.data.buckets import (
        Batcher,
        Batching,
        BucketRow,
        BucketStrategy,
        BucketSweep,
        bucket_batches,
        megabatch_batches,
        random_batches,
        sweep_buckets,
    )
    from probewise.throughput.data.ce_memory import (
        LogitMemory,
        measure_bytes_per_logit,
    )
    from probewise.throughput.data.length_input import (
        LengthInput,
        as_lengths,
        read_lengths,
        tokenize_lengths,
    )
    from probewise.throughput.data.lengths import (
        BatchingMode,
        ChunkPlan,
        HistogramBin,
        Lengths,
        LengthStats,
        LogitsDtype,
        PaddingReport,
        ce_chunk_plan,
        padding_waste,
    )
    from probewise.throughput.kernels import (
        Damage,
        Exclusion,
        ExclusionReason,
        KernelChange,
        KernelDiff,
        KernelKind,
        KernelRow,
        KernelTable,
        StepBreakdown,
        TraceSource,
    )
    from probewise.throughput.readers.chrome_trace import (
        ChromeTraceSet,
        TraceReader,
        read_chrome_traces,
        trace_reader,
    )
    from probewise.throughput.readers.profiler_table import (
        LabelledRow,
        ProfilerTableReading,
        RowLabel,
        read_profiler_tables,
    )
    from probewise.throughput.timing.harness import (
        Clock,
        CpuOpRow,
        KernelCapture,
        PaddingPenalty,
        ScalingMeasurement,
        StepTiming,
        capture_kernels,
        measure_scaling,
        padding_penalty,
        time_loss,
        time_step,
    )
    from probewise.throughput.timing.scaling import (
        ExtrapolationWarning,
        FitLoss,
        LossName,
        ScalingFit,
        ScalingPoint,
        Term,
        Terms,
    )

# Where each public name is defined: the same modules and names as the block above
# (tests/test_cli_startup.py holds the two, and ``__all__``, to the same names).
_SOURCES: dict[str, tuple[str, ...]] = {
    "probewise.throughput._torch_dtype": ("TorchDtype",),
    "probewise.throughput.attention.masks": (
        "Band",
        "BandKind",
        "bundled_configs",
        "FlexBlocks",
        "GqaHandling",
        "KernelPath",
        "LayerAttention",
        "MaskReport",
        "MaskScenario",
        "Packing",
        "Padding",
        "probe_masks",
    ),
    "probewise.throughput.attention.sdpa": (
        "AttentionDtype",
        "BackendPrediction",
        "BackendRuling",
        "MaskKind",
        "predict_backend",
        "SdpaBackend",
        "SdpaCall",
        "SdpaEnvironment",
    ),
    "probewise.throughput.data.buckets": (
        "Batcher",
        "Batching",
        "bucket_batches",
        "BucketRow",
        "BucketStrategy",
        "BucketSweep",
        "megabatch_batches",
        "random_batches",
        "sweep_buckets",
    ),
    "probewise.throughput.data.ce_memory": (
        "LogitMemory",
        "measure_bytes_per_logit",
    ),
    "probewise.throughput.data.length_input": (
        "as_lengths",
        "LengthInput",
        "read_lengths",
        "tokenize_lengths",
    ),
    "probewise.throughput.data.lengths": (
        "BatchingMode",
        "ce_chunk_plan",
        "ChunkPlan",
        "HistogramBin",
        "Lengths",
        "LengthStats",
        "LogitsDtype",
        "padding_waste",
        "PaddingReport",
    ),
    "probewise.throughput.kernels": (
        "Damage",
        "Exclusion",
        "ExclusionReason",
        "KernelChange",
        "KernelDiff",
        "KernelKind",
        "KernelRow",
        "KernelTable",
        "StepBreakdown",
        "TraceSource",
    ),
    "probewise.throughput.readers.chrome_trace": (
        "ChromeTraceSet",
        "TraceReader",
        "read_chrome_traces",
        "trace_reader",
    ),
    "probewise.throughput.readers.profiler_table": (
        "LabelledRow",
        "ProfilerTableReading",
        "read_profiler_tables",
        "RowLabel",
    ),
    "probewise.throughput.timing.harness": (
        "capture_kernels",
        "Clock",
        "CpuOpRow",
        "KernelCapture",
        "measure_scaling",
        "padding_penalty",
        "PaddingPenalty",
        "ScalingMeasurement",
        "StepTiming",
        "time_loss",
        "time_step",
    ),
    "probewise.throughput.timing.scaling": (
        "ExtrapolationWarning",
        "FitLoss",
        "LossName",
        "ScalingFit",
        "ScalingPoint",
        "Term",
        "Terms",
    ),
}

__all__ = [
    "AttentionDtype",
    "BackendPrediction",
    "BackendRuling",
    "Band",
    "BandKind",
    "Batcher",
    "Batching",
    "BatchingMode",
    "BucketRow",
    "BucketStrategy",
    "BucketSweep",
    "ChromeTraceSet",
    "ChunkPlan",
    "Clock",
    "CpuOpRow",
    "Damage",
    "Exclusion",
    "ExclusionReason",
    "ExtrapolationWarning",
    "FitLoss",
    "FlexBlocks",
    "GqaHandling",
    "HistogramBin",
    "KernelCapture",
    "KernelChange",
    "KernelDiff",
    "KernelKind",
    "KernelPath",
    "KernelRow",
    "KernelTable",
    "LabelledRow",
    "LayerAttention",
    "LengthInput",
    "LengthStats",
    "Lengths",
    "LogitMemory",
    "LogitsDtype",
    "LossName",
    "MaskKind",
    "MaskReport",
    "MaskScenario",
    "Packing",
    "Padding",
    "PaddingPenalty",
    "PaddingReport",
    "ProfilerTableReading",
    "RowLabel",
    "ScalingFit",
    "ScalingMeasurement",
    "ScalingPoint",
    "SdpaBackend",
    "SdpaCall",
    "SdpaEnvironment",
    "StepBreakdown",
    "StepTiming",
    "Term",
    "Terms",
    "TorchDtype",
    "TraceReader",
    "TraceSource",
    "as_lengths",
    "bucket_batches",
    "bundled_configs",
    "capture_kernels",
    "ce_chunk_plan",
    "measure_bytes_per_logit",
    "measure_scaling",
    "megabatch_batches",
    "padding_penalty",
    "padding_waste",
    "predict_backend",
    "probe_masks",
    "random_batches",
    "read_chrome_traces",
    "read_lengths",
    "read_profiler_tables",
    "sweep_buckets",
    "time_loss",
    "time_step",
    "tokenize_lengths",
    "trace_reader",
]

# At run time only: a module ``__getattr__`` that type checkers see makes them accept any
# attribute of the package, typos included; the names above are all they should know.
if not TYPE_CHECKING:
    __getattr__, __dir__ = LazyFace.of(__name__, _SOURCES)
