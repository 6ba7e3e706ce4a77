"""probewise: measurement discipline for model probes.

Everything public is re-exported here; nothing else lives in this module.
"""

from probewise.errors import (
    CrossDocumentAttentionError,
    DamageKind,
    FastPathLostError,
    InsufficientPointsError,
    InvalidInputError,
    ProbewiseError,
    RubricError,
    SealedError,
    SweepNoOpError,
    TraceFormatError,
)
from probewise.responses.classify import Completion, classify, normalise
from probewise.responses.control import ControlState, ControlVerdict, compare_arms
from probewise.responses.outcome import (
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    FinishReason,
    Outcome,
    Refused,
)
from probewise.responses.rubric import Rubric, Rule
from probewise.responses.sealed import Sealed
from probewise.responses.tally import ArmTally, Proportion
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
from probewise.throughput.traces import (
    ChromeTraceSet,
    LabelledRow,
    ProfilerTableReading,
    RowLabel,
    read_chrome_traces,
    read_profiler_tables,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "ArmTally",
    "ChromeTraceSet",
    "Completion",
    "Complied",
    "ControlState",
    "ControlVerdict",
    "CrossDocumentAttentionError",
    "Damage",
    "DamageKind",
    "Deflected",
    "Empty",
    "Error",
    "ErrorKind",
    "Exclusion",
    "ExclusionReason",
    "FastPathLostError",
    "FinishReason",
    "InsufficientPointsError",
    "InvalidInputError",
    "KernelChange",
    "KernelDiff",
    "KernelKind",
    "KernelRow",
    "KernelTable",
    "LabelledRow",
    "Outcome",
    "ProbewiseError",
    "ProfilerTableReading",
    "Proportion",
    "Refused",
    "RowLabel",
    "Rubric",
    "RubricError",
    "Rule",
    "Sealed",
    "SealedError",
    "StepBreakdown",
    "SweepNoOpError",
    "TraceFormatError",
    "TraceSource",
    "__version__",
    "classify",
    "compare_arms",
    "normalise",
    "read_chrome_traces",
    "read_profiler_tables",
]
