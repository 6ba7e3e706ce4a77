"""probewise: measurement discipline for model probes.

The top level holds the everyday core: every error, and the names of the public
contract in DESIGN.md (outcomes, ``classify``, the rubric, tallies, ``compare_arms``,
calibration, ``run_arm``; the kernel table, the mask probe, the scaling fit, lengths
and bucketing). Everything else public lives in the face of its half,
:mod:`probewise.responses` or :mod:`probewise.throughput`.

The names are loaded lazily (PEP 562): ``import probewise`` imports no submodule, and
``probewise.X`` or ``from probewise import X`` imports the one module that defines
``X`` on first use, so that ``probewise --help`` and a program that needs only the
response half do not pay for the throughput half (numpy, scipy, torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from probewise._lazy import LazyFace

if TYPE_CHECKING:
    from probewise.errors import (
        ArgumentTypeError as ArgumentTypeError,
        ArgumentTypeValueError as ArgumentTypeValueError,
        CalibrationError as CalibrationError,
        CheckpointInUseError as CheckpointInUseError,
        CheckpointMismatchError as CheckpointMismatchError,
        CrossDocumentAttentionError as CrossDocumentAttentionError,
        DamageKind as DamageKind,
        EmptyChoicesError as EmptyChoicesError,
        FastPathLostError as FastPathLostError,
        InferenceServerError as InferenceServerError,
        InputFileError as InputFileError,
        InsufficientPointsError as InsufficientPointsError,
        InvalidInputError as InvalidInputError,
        LengthInputError as LengthInputError,
        MalformedResponseError as MalformedResponseError,
        MissingExtraError as MissingExtraError,
        MixedJobsError as MixedJobsError,
        ProbewiseError as ProbewiseError,
        ResponseTooLargeError as ResponseTooLargeError,
        RubricError as RubricError,
        SealedError as SealedError,
        ServerStatusError as ServerStatusError,
        ServerTimeoutError as ServerTimeoutError,
        SpillError as SpillError,
        SweepNoOpError as SweepNoOpError,
        TraceFormatError as TraceFormatError,
        UnknownFinishReasonError as UnknownFinishReasonError,
        UnsupportedModelError as UnsupportedModelError,
    )
    from probewise.responses import (
        ArmTally as ArmTally,
        BatchGenerate as BatchGenerate,
        Calibration as Calibration,
        Completion as Completion,
        Complied as Complied,
        ControlState as ControlState,
        ControlVerdict as ControlVerdict,
        CorrectedRate as CorrectedRate,
        Deflected as Deflected,
        Empty as Empty,
        Error as Error,
        ErrorKind as ErrorKind,
        FinishReason as FinishReason,
        Generate as Generate,
        HumanLabel as HumanLabel,
        OpenAICompatibleGenerator as OpenAICompatibleGenerator,
        Outcome as Outcome,
        OutcomePair as OutcomePair,
        PairedResult as PairedResult,
        Proportion as Proportion,
        Refused as Refused,
        Rubric as Rubric,
        Rule as Rule,
        Sealed as Sealed,
        classify as classify,
        compare_arms as compare_arms,
        run_arm as run_arm,
        run_paired as run_paired,
    )
    from probewise.throughput import (
        BucketSweep as BucketSweep,
        ChunkPlan as ChunkPlan,
        KernelKind as KernelKind,
        KernelRow as KernelRow,
        KernelTable as KernelTable,
        LengthStats as LengthStats,
        MaskReport as MaskReport,
        MaskScenario as MaskScenario,
        Packing as Packing,
        PaddingReport as PaddingReport,
        ScalingFit as ScalingFit,
        ScalingPoint as ScalingPoint,
        ce_chunk_plan as ce_chunk_plan,
        padding_waste as padding_waste,
        probe_masks as probe_masks,
        read_lengths as read_lengths,
        sweep_buckets as sweep_buckets,
    )


__version__ = "0.1.0.dev0"


# At run time only: a module ``__getattr__`` that type checkers see makes them accept any
# attribute of the package, typos included; the names above are all they should know.
if not TYPE_CHECKING:
    __getattr__, __dir__ = LazyFace.of(__name__, __file__)
