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
    from probewise.throughput._kernel_rows import (
        Damage as Damage,
        Exclusion as Exclusion,
        ExclusionReason as ExclusionReason,
        KernelKind as KernelKind,
        KernelRow as KernelRow,
        StepBreakdown as StepBreakdown,
        TableParts as TableParts,
        TraceSource as TraceSource,
    )
    from probewise.throughput._torch_dtype import (
        TorchDtype as TorchDtype,
    )
    from probewise.throughput.attention.masks import (
        Band as Band,
        BandKind as BandKind,
        FlexBlocks as FlexBlocks,
        GqaHandling as GqaHandling,
        KernelPath as KernelPath,
        LayerAttention as LayerAttention,
        MaskReport as MaskReport,
        MaskScenario as MaskScenario,
        Packing as Packing,
        Padding as Padding,
        bundled_configs as bundled_configs,
        probe_masks as probe_masks,
    )
    from probewise.throughput.attention.sdpa import (
        AttentionDtype as AttentionDtype,
        BackendPrediction as BackendPrediction,
        BackendRuling as BackendRuling,
        MaskKind as MaskKind,
        SdpaBackend as SdpaBackend,
        SdpaCall as SdpaCall,
        SdpaEnvironment as SdpaEnvironment,
        predict_backend as predict_backend,
    )
    from probewise.throughput.data.buckets import (
        Batcher as Batcher,
        Batching as Batching,
        BucketRow as BucketRow,
        BucketStrategy as BucketStrategy,
        BucketSweep as BucketSweep,
        bucket_batches as bucket_batches,
        megabatch_batches as megabatch_batches,
        random_batches as random_batches,
        sweep_buckets as sweep_buckets,
    )
    from probewise.throughput.data.ce_memory import (
        LogitMemory as LogitMemory,
        measure_bytes_per_logit as measure_bytes_per_logit,
    )
    from probewise.throughput.data.length_input import (
        LengthInput as LengthInput,
        as_lengths as as_lengths,
        read_lengths as read_lengths,
        tokenize_lengths as tokenize_lengths,
    )
    from probewise.throughput.data.ce_chunks import (
        ChunkPlan as ChunkPlan,
        LogitsDtype as LogitsDtype,
        ce_chunk_plan as ce_chunk_plan,
    )
    from probewise.throughput.data.lengths import (
        BatchingMode as BatchingMode,
        HistogramBin as HistogramBin,
        Lengths as Lengths,
        LengthStats as LengthStats,
        PaddingReport as PaddingReport,
        padding_waste as padding_waste,
    )
    from probewise.throughput.kernels import (
        KernelChange as KernelChange,
        KernelDiff as KernelDiff,
        KernelTable as KernelTable,
    )
    from probewise.throughput.readers.chrome_trace import (
        TraceReader as TraceReader,
        trace_reader as trace_reader,
    )
    from probewise.throughput.readers.profiler_table import (
        LabelledRow as LabelledRow,
        RowLabel as RowLabel,
    )
    from probewise.throughput.table_readings import (
        ProfilerTableReading as ProfilerTableReading,
        read_profiler_tables as read_profiler_tables,
    )
    from probewise.throughput.timing.harness import (
        Clock as Clock,
        CpuOpRow as CpuOpRow,
        KernelCapture as KernelCapture,
        PaddingPenalty as PaddingPenalty,
        ScalingMeasurement as ScalingMeasurement,
        StepTiming as StepTiming,
        capture_kernels as capture_kernels,
        measure_scaling as measure_scaling,
        padding_penalty as padding_penalty,
        time_loss as time_loss,
        time_step as time_step,
    )
    from probewise.throughput.timing.scaling import (
        ExtrapolationWarning as ExtrapolationWarning,
        FitLoss as FitLoss,
        LossName as LossName,
        ScalingFit as ScalingFit,
        ScalingPoint as ScalingPoint,
        Term as Term,
        Terms as Terms,
    )
    from probewise.throughput.trace_sets import (
        ChromeTraceSet as ChromeTraceSet,
        read_chrome_traces as read_chrome_traces,
    )


# At run time only: a module ``__getattr__`` that type checkers see makes them accept any
# attribute of the package, typos included; the names above are all they should know.
if not TYPE_CHECKING:
    __getattr__, __dir__ = LazyFace.of(__name__, __file__)
